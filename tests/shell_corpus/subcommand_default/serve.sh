#!/bin/bash
# serve.sh [serve|bench|shell] [extra args]
set -euo pipefail
cmd=${1:-serve}
shift || true

export TORCH_CUDA_ARCH_LIST="9.0"
export VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-INFO}

case $cmd in
    serve)
        exec vllm serve /models/phi-4 --port 8000 --max-num-seqs 64 "$@"
        ;;
    bench)
        exec python3 -m vllm.entrypoints.cli.main bench serve --model /models/phi-4 "$@"
        ;;
    shell)
        exec /bin/bash
        ;;
    *)
        exec "$cmd" "$@"
        ;;
esac
