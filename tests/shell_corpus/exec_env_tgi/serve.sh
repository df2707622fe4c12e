#!/bin/bash
# Text Generation Inference on four of the eight GPUs; the other four run the
# embedding service. Written for the bare-metal hosts (no docker).
set -euo pipefail

MODEL_ID=${MODEL_ID:-meta-llama/Llama-3.1-8B-Instruct}
SHARDS=4
export HUGGINGFACE_HUB_CACHE=~/.cache/huggingface/hub
export HF_HUB_ENABLE_HF_TRANSFER=0
MAX_INPUT_TOKENS=${MAX_INPUT_TOKENS:-8192}

# TGI reads its own settings from the environment too; keep them next to the flags.
export MAX_BATCH_PREFILL_TOKENS=$((MAX_INPUT_TOKENS * 2))

exec env CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_P2P_DISABLE=0 \
    text-generation-launcher \
    --model-id "$MODEL_ID" \
    --num-shard "$SHARDS" \
    --max-input-tokens "$MAX_INPUT_TOKENS" \
    --max-total-tokens $((MAX_INPUT_TOKENS + 2048)) \
    ${QUANTIZE:+--quantize "$QUANTIZE"} \
    --hostname 0.0.0.0 \
    --port 8080
