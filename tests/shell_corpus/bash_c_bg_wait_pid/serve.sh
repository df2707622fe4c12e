#!/bin/bash
MODEL_PATH=${MODEL_PATH:-/models/Meta-Llama-3.1-8B-Instruct}
LOG_DIR=${LOG_DIR:-./logs}
mkdir -p "$LOG_DIR"

CMD="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python3 -m sglang.launch_server"
CMD="$CMD --model-path $MODEL_PATH --context-length 131072 --port 30000"

export NCCL_CUMEM_ENABLE=0
bash -c "$CMD" &
SERVER_PID=$!
echo "server pid $SERVER_PID"
trap 'kill $SERVER_PID 2>/dev/null' EXIT
wait $SERVER_PID
