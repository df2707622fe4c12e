#!/bin/bash
# vLLM with the quantization chosen by the QUANT variable of the unit file.
# SERVER_ARGS and QUANT_ARGS are split into words on purpose (no quotes below).
set -euo pipefail

MODEL=${MODEL:-Qwen/Qwen2.5-72B-Instruct}
PORT=${PORT:-8000}
SERVER_ARGS="--max-model-len 32768 --gpu-memory-utilization 0.90 --enable-prefix-caching"
QUANT_ARGS=""

case "${QUANT:-none}" in
    fp8)
        QUANT_ARGS="--quantization fp8 --kv-cache-dtype fp8_e4m3"
        export VLLM_FP8_PADDING=1
        ;;
    awq)
        QUANT_ARGS="--quantization awq_marlin"
        ;;
    none) ;;
    *)
        echo "unknown QUANT=$QUANT" >&2
        exit 2
        ;;
esac

export VLLM_WORKER_MULTIPROC_METHOD=spawn
export VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-INFO}

echo "serving $MODEL on :$PORT ($SERVER_ARGS ${QUANT_ARGS})"
# shellcheck disable=SC2086
exec vllm serve "$MODEL" $SERVER_ARGS ${QUANT_ARGS} --port "${PORT}" -tp 4
