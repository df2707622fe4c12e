#!/bin/bash
cd "$(dirname "$0")"
set -o allexport
source <(grep -E '^[A-Z_]+=' settings.conf)
set +o allexport
exec text-generation-launcher --model-id "$MODEL_ID" --max-total-tokens "$MAX_TOTAL" --port 3000
