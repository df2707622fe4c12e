#!/bin/bash
# Defaults for anything the orchestrator did not set
: ${PORT:=8080}
: ${HOSTNAME_BIND:=0.0.0.0}
: ${MAX_INPUT_TOKENS:=4096}
: ${MODEL_ID:=HuggingFaceH4/zephyr-7b-beta}
export PORT MODEL_ID

CMD="text-generation-launcher --model-id $MODEL_ID --port $PORT --hostname $HOSTNAME_BIND"
CMD="$CMD --max-input-tokens $MAX_INPUT_TOKENS --max-total-tokens $((MAX_INPUT_TOKENS * 2))"
echo "$CMD"
exec ${CMD}
