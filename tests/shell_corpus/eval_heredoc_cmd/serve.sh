#!/bin/bash
PORT=${PORT:-30000}
MODEL=${MODEL:-deepseek-ai/DeepSeek-R1-Distill-Qwen-32B}

read -r -d '' LAUNCH <<EOF2
SGLANG_SET_CPU_AFFINITY=1 python3 -m sglang.launch_server
  --model-path $MODEL
  --tp 4 --port $PORT
  --reasoning-parser deepseek-r1
  --enable-torch-compile
EOF2

echo "starting on port $PORT"
eval ${LAUNCH}
