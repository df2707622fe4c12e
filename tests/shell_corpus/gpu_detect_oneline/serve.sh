#!/bin/bash
# SGLang decode with settings picked from the GPU model of the host.
set -euo pipefail

export NCCL_DEBUG=INFO
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
GPU_COUNT=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)

case "$GPU_NAME" in
    *H100* | *H800*) GPU_TYPE=hopper ;;
    *A100* | *A800*) GPU_TYPE=ampere ;;
    *) GPU_TYPE=unknown ;;
esac

if [ "$GPU_TYPE" = hopper ]; then export NCCL_NVLS_ENABLE=1; else export NCCL_NVLS_ENABLE=0; fi
if [ "$GPU_COUNT" -ge 8 ]; then TP=8; else TP=$GPU_COUNT; fi

# The tuning guide sets NCCL_DEBUG again here; same value, later line.
NCCL_DEBUG=INFO
export SGLANG_ENABLE_SPEC_V2=${SGLANG_ENABLE_SPEC_V2:-0}

echo "$GPU_COUNT x $GPU_NAME ($GPU_TYPE), tp=$TP"
PYTHONUNBUFFERED=1 SGLANG_GPU_TYPE=$GPU_TYPE exec python3 -m sglang.launch_server \
    --model-path /models/DeepSeek-V3 \
    --tp "$TP" \
    --disaggregation-mode decode \
    --port 30001
