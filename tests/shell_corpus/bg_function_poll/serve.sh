#!/bin/bash
PORT=${PORT:-8001}

start_server() {
    local tp=$1
    export CUDA_VISIBLE_DEVICES=${GPUS:-0,1}
    text-generation-launcher --model-id TheBloke/Llama-2-13B-AWQ --quantize awq \
        --num-shard "$tp" --port "$PORT" &
    SERVER_PID=$!
}

start_server 2
until curl -sf "http://localhost:$PORT/health" >/dev/null; do
    sleep 2
done
echo "TGI is up (pid $SERVER_PID)"
wait "$SERVER_PID"
