#!/bin/bash
# Router in front of the prefill and decode pools (sglang_router, PD mode).
set -euo pipefail

PREFILL_HOST=${PREFILL_HOST:-prefill-0.sglang.svc}
DECODE_HOST=${DECODE_HOST:-decode-0.sglang.svc}
ROUTER_PORT=${ROUTER_PORT:-8000}
POLICY=${POLICY:-cache_aware}

export RUST_LOG=${RUST_LOG:-info}
export RUST_BACKTRACE=1

# Wait for both pools before the router starts routing into the void.
for url in "http://${PREFILL_HOST}:30000/health" "http://${DECODE_HOST}:30001/health"; do
    until curl -sf "$url" > /dev/null; do
        echo "waiting for $url"
        sleep 2
    done
done

nohup python3 -m sglang_router.launch_router \
    --pd-disaggregation \
    --prefill "http://${PREFILL_HOST}:30000" 8998 \
    --decode "http://${DECODE_HOST}:30001" \
    --host 0.0.0.0 \
    --port "$ROUTER_PORT" \
    --policy "$POLICY" > router.log 2>&1 &
ROUTER_PID=$!

# Only the health check below sees these; the router was started already.
export ROUTER_STARTED=1
export RUST_LOG=debug

until curl -sf "http://127.0.0.1:${ROUTER_PORT}/health" > /dev/null; do
    sleep 1
done
echo "router up (pid $ROUTER_PID)"
wait "$ROUTER_PID"
