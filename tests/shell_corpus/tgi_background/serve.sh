#!/bin/bash
# TGI sidecar: the launcher runs in the background so that the script can
# register the instance once the health check passes.
set -euo pipefail

MODEL_ID=${MODEL_ID:-mistralai/Mistral-7B-Instruct-v0.3}
PORT=${PORT:-3000}
export HF_HOME=~/hf
export PREFIX_CACHING=1
export USE_FLASH_ATTENTION=${USE_FLASH_ATTENTION:-true}

docker info > /dev/null 2>&1 && echo "note: docker is available, this host runs TGI bare"

# shellcheck disable=SC2086
text-generation-launcher \
    --model-id "${MODEL_ID}" \
    --port "${PORT}" \
    ${QUANTIZE:+--quantize $QUANTIZE} \
    --max-concurrent-requests 512 \
    --json-output &
TGI_PID=$!

until curl -sf "http://localhost:${PORT}/health"; do sleep 1; done
curl -sf -X POST "http://registry.internal/register?port=${PORT}" || true

wait $TGI_PID
