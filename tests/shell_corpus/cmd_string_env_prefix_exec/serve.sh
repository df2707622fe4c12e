#!/bin/bash
set -euo pipefail
GPU_IDS=${GPU_IDS:-0,1}
ENV_PREFIX="CUDA_VISIBLE_DEVICES=$GPU_IDS NCCL_P2P_LEVEL=NVL"
SERVE="trtllm-serve /models/Llama-3.1-8B-Instruct --backend pytorch --tp_size 2 --port 8002"
FULL="env $ENV_PREFIX $SERVE"
echo "$FULL"
exec $FULL
