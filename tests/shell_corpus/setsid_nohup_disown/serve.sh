#!/bin/bash
ENGINE=/engines/llama-3.1-70b-fp8
export TLLM_LOG_LEVEL=WARNING
nohup trtllm-serve "$ENGINE" --tp_size 4 --port 8000 --kv_cache_free_gpu_memory_fraction 0.9 \
    > trtllm.log 2>&1 < /dev/null &
echo $! > trtllm.pid
disown
sleep infinity
