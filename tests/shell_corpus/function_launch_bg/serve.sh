#!/bin/bash
# Decode server started in the background by a helper, then watched until healthy.
set -euo pipefail

. ./common.sh

MODEL_PATH=${MODEL_PATH:-/models/DeepSeek-V2-Lite-Chat}
DECODE_PORT=${DECODE_PORT:-30002}
export SGLANG_LOG_LEVEL=info

start_server() {
    local port=$1
    local -a args=(--model-path "$MODEL_PATH" --port "$port")
    args+=(--tp 2 --trust-remote-code)
    export SGLANG_SERVER_ROLE=decode
    log "launching on :$port"
    python3 -m sglang.launch_server "${args[@]}" --log-level "$SGLANG_LOG_LEVEL" &
    SERVER_PID=$!
}

start_server "$DECODE_PORT"

# Set after the launch: the server never sees these.
export HEALTH_RETRIES=60
SGLANG_LOG_LEVEL=debug

for ((i = 0; i < HEALTH_RETRIES; i++)); do
    if curl -sf "http://127.0.0.1:${DECODE_PORT}/health_generate" > /dev/null; then
        log "healthy after $i tries"
        break
    fi
    sleep 5
done

wait "$SERVER_PID"
