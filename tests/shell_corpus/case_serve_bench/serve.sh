#!/bin/bash
# One script for the vLLM box: "serve" starts the API server, "bench" runs the
# serving benchmark against it. Extra arguments go to the chosen command.
set -euo pipefail

MODEL=${MODEL:-/models/Mistral-Large-Instruct-2411}
TP=${TP:-8}
export VLLM_ATTENTION_BACKEND=FLASHINFER
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1,2,3,4,5,6,7}

usage() {
    echo "usage: $0 {serve|bench} [extra args]" >&2
}

cmd=${1:-}
shift || true

case "$cmd" in
    serve)
        export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
        exec python3 -m vllm.entrypoints.openai.api_server \
            --model "$MODEL" \
            --tensor-parallel-size "$TP" \
            --disable-log-requests \
            "$@"
        ;;
    bench)
        exec python3 benchmarks/benchmark_serving.py --backend vllm --model "$MODEL" "$@"
        ;;
    *)
        usage
        exit 1
        ;;
esac
