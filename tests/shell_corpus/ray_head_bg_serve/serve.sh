#!/bin/bash
# head node: ray in the background, then the server once ray answers
export RAY_DEDUP_LOGS=0
(ray start --head --port=6379 --block >/dev/null 2>&1 || true) &
sleep 1
export VLLM_HOST_IP=10.8.0.1
vllm serve /models/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 \
    --distributed-executor-backend ray --trust-remote-code --port 8000 &
SERVE_PID=$!
wait $SERVE_PID
