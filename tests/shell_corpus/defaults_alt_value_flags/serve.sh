#!/bin/bash
# Optional options are only passed when their variable is set:
# ${VAR:+--flag "$VAR"} expands to nothing otherwise.
set -u

: "${MODEL:=/models/Meta-Llama-3.1-8B-Instruct}" "${PORT:=8000}" "${HF_HOME:=/data/hf}"
export HF_HOME

QUANT=${QUANT:-}
MAX_LEN=${MAX_LEN:-}
LORA_DIR=${LORA_DIR-}
API_KEY_FILE=${API_KEY_FILE:-/run/secrets/vllm_api_key}

if [ -r "$API_KEY_FILE" ]; then
    export VLLM_API_KEY=$(<"$API_KEY_FILE")
fi

exec vllm serve "$MODEL" --port "$PORT" \
    ${QUANT:+--quantization "$QUANT"} \
    ${MAX_LEN:+--max-model-len $MAX_LEN} \
    ${LORA_DIR:+--enable-lora --lora-modules "adapter=$LORA_DIR"} \
    --disable-log-requests
