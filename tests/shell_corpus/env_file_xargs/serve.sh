#!/bin/bash
# vLLM for the batch pipeline. Settings live in .env next to this script.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export $(grep -v '^#' "$SCRIPT_DIR/.env" | xargs)

METRICS_FLAG=${ENABLE_METRICS:+--enable-metrics}
LORA_FLAGS=${LORA_PATH:+--enable-lora --lora-modules batch=$LORA_PATH}

# shellcheck disable=SC2086
exec python3 -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" \
    --port "${PORT:-8000}" \
    --max-model-len "$MAX_MODEL_LEN" \
    $LORA_FLAGS $METRICS_FLAG \
    --disable-frontend-multiprocessing
