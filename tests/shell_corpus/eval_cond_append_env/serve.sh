#!/bin/bash
# Container entrypoint: every vLLM option comes from a VLLM_* variable of the
# deployment; options left empty are not passed at all.
set -e

MODEL_NAME="${VLLM_MODEL_NAME:-mistralai/Mistral-7B-Instruct-v0.3}"

CMD="vllm serve ${MODEL_NAME}"
[ -n "${VLLM_HOST:-}" ] && CMD+=" --host ${VLLM_HOST}"
[ -n "${VLLM_PORT:-}" ] && CMD+=" --port ${VLLM_PORT}"
[ -n "${VLLM_TP_SIZE:-}" ] && CMD+=" --tensor-parallel-size ${VLLM_TP_SIZE}"
[ -n "${VLLM_DTYPE:-}" ] && CMD+=" --dtype ${VLLM_DTYPE}"
[ -n "${VLLM_MAX_MODEL_LEN:-}" ] && CMD+=" --max-model-len ${VLLM_MAX_MODEL_LEN}"
if [ "${VLLM_ENABLE_PREFIX_CACHING:-false}" = "true" ]; then
    CMD+=" --enable-prefix-caching"
fi
CMD+=" --gpu-memory-utilization ${VLLM_GPU_UTIL:-0.90}"

export VLLM_WORKER_MULTIPROC_METHOD=spawn
echo "Running: ${CMD}"
eval "${CMD}"
