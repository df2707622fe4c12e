#!/bin/bash
MODEL_ID=${MODEL_ID:-meta-llama/Llama-3.2-1B-Instruct}
NUM_SHARD=${NUM_SHARD:-1}
MAX_BATCH_PREFILL=${MAX_BATCH_PREFILL:-4096}

ARGS="--model-id $MODEL_ID --num-shard $NUM_SHARD --max-batch-prefill-tokens $MAX_BATCH_PREFILL"
[ -n "$QUANTIZE" ] && ARGS="$ARGS --quantize $QUANTIZE"
[ -n "$REVISION" ] && ARGS="$ARGS --revision $REVISION"

export HF_HUB_ENABLE_HF_TRANSFER=1
exec text-generation-launcher $ARGS --port 80
