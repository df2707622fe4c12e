#!/bin/bash
MODEL=${MODEL:-/models/Llama-2-13b-chat-hf}
ARGS="--dtype float16 --max-model-len 4096"
if [ -n "${LORA_DIR:-}" ]; then
    ARGS="$ARGS --enable-lora --lora-modules sql=$LORA_DIR"
fi
export VLLM_LOGGING_LEVEL=DEBUG
CMD="python3 -m vllm.entrypoints.openai.api_server --model $MODEL $ARGS $@"
echo "launching: $CMD"
$CMD
