#!/bin/bash
export SGLANG_ENABLE_METRICS=1
python3 -m sglang.launch_server --model-path /models/Qwen2.5-72B-Instruct-AWQ --tp 4 \
    --port 30000 --enable-metrics &
SERVER=$!
python3 healthwatch.py --url http://127.0.0.1:30000/health &
WATCH=$!
wait -n
echo "one of $SERVER $WATCH exited"
kill $SERVER $WATCH 2>/dev/null
