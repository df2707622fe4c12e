#!/bin/bash
set -euo pipefail
SIZE=${MODEL_SIZE:-8b}
case "$SIZE" in
    8b)
        ARGS=(--model-path /models/Llama-3.1-8B-Instruct --tp 1)
        ;;
    70b)
        ARGS=(--model-path /models/Llama-3.1-70B-Instruct --tp 4 --enable-torch-compile)
        export SGLANG_TORCH_COMPILE_MAX_BS=32
        ;;
    405b)
        ARGS=(--model-path /models/Llama-3.1-405B-Instruct-FP8 --tp 8 --quantization fp8)
        ;;
esac
ARGS+=(--host 0.0.0.0 --port "${PORT:-30000}")
exec python3 -m sglang.launch_server "${ARGS[@]}"
