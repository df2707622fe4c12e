#!/bin/sh
# Container entrypoint: no arguments runs the default server, otherwise run what was given.
set -e

export HF_HOME=${HF_HOME:-/data/hf}
export VLLM_NO_USAGE_STATS=1

if [ "$#" -eq 0 ]; then
    exec python3 -m vllm.entrypoints.openai.api_server \
        --model "${MODEL_NAME:-Qwen/Qwen2.5-7B-Instruct}" \
        --port "${PORT:-8000}" \
        --gpu-memory-utilization 0.9
fi

exec "$@"
