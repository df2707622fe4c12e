#!/bin/bash
# SGLang prefill/decode disaggregation on one host: serve.sh prefill|decode|router
set -euo pipefail

MODEL=${MODEL:-/mnt/weights/DeepSeek-V2-Lite-Chat}
IB_DEV=${IB_DEV:-mlx5_1}

common_env() {
    export SGLANG_TORCH_PROFILER_DIR=/tmp/profiles
    export MC_TE_METRIC=1
}

run_prefill() {
    common_env
    export CUDA_VISIBLE_DEVICES=0,1
    exec python3 -m sglang.launch_server --model-path "$MODEL" --tp 2 \
        --disaggregation-mode prefill --disaggregation-ib-device "$IB_DEV" --port 30000
}

run_decode() {
    common_env
    export CUDA_VISIBLE_DEVICES=2,3
    export SGLANG_DECODE_BOOTSTRAP_TIMEOUT=600
    exec python3 -m sglang.launch_server --model-path "$MODEL" --tp 2 \
        --disaggregation-mode decode --disaggregation-ib-device "$IB_DEV" --port 30001 \
        --cuda-graph-max-bs 64
}

run_router() {
    exec python3 -m sglang_router.launch_router --pd-disaggregation \
        --prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001 --port 8000
}

case "$1" in
    prefill) run_prefill ;;
    decode) run_decode ;;
    router) run_router ;;
    *) echo "usage: $0 prefill|decode|router" >&2; exit 2 ;;
esac
