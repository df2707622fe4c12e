#!/bin/bash
set -euo pipefail
IFS=',' read -ra GPU_LIST <<< "${CUDA_VISIBLE_DEVICES:-0}"
TP=${#GPU_LIST[@]}
FIRST_GPU=${GPU_LIST[0]}
export SGLANG_PORT_BASE=$((30000 + FIRST_GPU))
exec python3 -m sglang.launch_server --model-path /models/Llama-3.1-8B-Instruct --tp "$TP" \
    --port "$SGLANG_PORT_BASE" --base-gpu-id 0
