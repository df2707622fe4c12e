#!/bin/bash
NUM_WORKERS=${NUM_WORKERS:-2}
BASE_PORT=30000
export SGLANG_LOG_LEVEL=warning
for ((i = 0; i < NUM_WORKERS; i++)); do
    CUDA_VISIBLE_DEVICES=$i python3 -m sglang.launch_server --model-path /models/Phi-4-mini-instruct \
        --port $((BASE_PORT + i)) --mem-fraction-static 0.8 &
done
wait
