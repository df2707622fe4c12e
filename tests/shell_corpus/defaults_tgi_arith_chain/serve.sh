#!/usr/bin/env bash
# TGI launcher: token budgets default from the input length the caller gives.
set -eo pipefail

MODEL_ID=${MODEL_ID:-meta-llama/Llama-3.1-8B-Instruct}
NUM_SHARD=${NUM_SHARD:-$(nvidia-smi -L | wc -l)}
MAX_INPUT_TOKENS=${MAX_INPUT_TOKENS:-4096}
MAX_TOTAL_TOKENS=${MAX_TOTAL_TOKENS:-$((MAX_INPUT_TOKENS + 1024))}
MAX_BATCH_PREFILL_TOKENS=${MAX_BATCH_PREFILL_TOKENS:-$((MAX_INPUT_TOKENS * 2))}

# the launcher reads these from the environment as well
export HUGGINGFACE_HUB_CACHE=${HUGGINGFACE_HUB_CACHE:-/data}
export MAX_CONCURRENT_REQUESTS=${MAX_CONCURRENT_REQUESTS:-128}
export PORT=${PORT:-80}

if (( NUM_SHARD > 1 )); then
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((NUM_SHARD - 1)))}
fi

exec text-generation-launcher \
    --model-id "$MODEL_ID" \
    --num-shard "$NUM_SHARD" \
    --max-input-tokens "$MAX_INPUT_TOKENS" \
    --max-total-tokens "$MAX_TOTAL_TOKENS" \
    --max-batch-prefill-tokens "$MAX_BATCH_PREFILL_TOKENS" \
    --hostname 0.0.0.0
