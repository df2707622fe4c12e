#!/bin/bash
# StatefulSet pods are named llm-prefill-N / llm-decode-N; NODE_NAME comes
# from the downward API, the hostname otherwise.
set -euo pipefail

NODE_NAME=${NODE_NAME:-$(hostname -s)}
MODEL_PATH=/models/Llama-3.1-70B-Instruct
COMMON="--model-path $MODEL_PATH --tp 8 --host 0.0.0.0"

run_prefill() {
    export SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=8
    exec python3 -m sglang.launch_server $COMMON --port 30000 \
        --disaggregation-mode prefill --chunked-prefill-size 16384
}

run_decode() {
    export SGLANG_DISAGGREGATION_QUEUE_SIZE=16
    exec python3 -m sglang.launch_server $COMMON --port 30001 \
        --disaggregation-mode decode --cuda-graph-max-bs 256
}

case "$NODE_NAME" in
    *-prefill-*) run_prefill ;;
    *-decode-*)  run_decode ;;
    *)
        echo "cannot tell the role of $NODE_NAME" >&2
        exit 1
        ;;
esac
