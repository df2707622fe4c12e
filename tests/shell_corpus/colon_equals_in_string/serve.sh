#!/bin/bash
set -eu
CMD="vllm serve ${MODEL:=facebook/opt-125m} --port ${VLLM_PORT:=8000}"
CMD+=" --gpu-memory-utilization ${GPU_UTIL:-0.85}"
export VLLM_PORT
export VLLM_LOGGING_LEVEL=WARNING
echo "serving $MODEL"
exec $CMD
