#!/bin/bash
LOG=${LOG:-/tmp/vllm.log}
cleanup() {
    echo "stopping $PID"
    kill "$PID" 2>/dev/null
}
export VLLM_ENGINE_READY_TIMEOUT_S=1800
vllm serve /models/Qwen3-30B-A3B --enable-expert-parallel --tensor-parallel-size 4 \
    --port 8000 > "$LOG" 2>&1 &
PID=$!
trap cleanup EXIT INT TERM
wait $PID
