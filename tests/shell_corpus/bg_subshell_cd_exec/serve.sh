#!/bin/bash
# Start vLLM from its run folder in a subshell, wait until /health answers,
# register with the gateway, then stay attached to the server.
set -euo pipefail

MODEL=${MODEL:-/models/Phi-3.5-mini-instruct}
RUN_DIR="$PWD/run/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN_DIR"
LOG="$RUN_DIR/server.log"
PORT=8011
export VLLM_NO_USAGE_STATS=1

(
    cd "$RUN_DIR"
    export VLLM_LOGGING_LEVEL=DEBUG
    exec vllm serve "$MODEL" \
        --port "$PORT" \
        --max-num-seqs 64 \
        --enforce-eager
) > "$LOG" 2>&1 &
SERVER_PID=$!
echo "$SERVER_PID" > "$RUN_DIR/server.pid"

until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
    kill -0 "$SERVER_PID" || { cat "$LOG"; exit 1; }
    sleep 2
done
curl -sf -X POST "http://gateway:9000/register?port=$PORT" || true

wait "$SERVER_PID"
