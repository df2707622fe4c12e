#!/bin/bash
set -e
# Everything comes from the container's environment; unset means vLLM's own default.
MODEL_NAME="${VLLM_MODEL_NAME:-mistralai/Mistral-7B-Instruct-v0.3}"

CMD="vllm serve ${MODEL_NAME}"
[ -n "${VLLM_PORT:-}" ] && CMD+=" --port ${VLLM_PORT}"
[ -n "${VLLM_TP_SIZE:-}" ] && CMD+=" --tensor-parallel-size ${VLLM_TP_SIZE}"
[ -n "${VLLM_MAX_MODEL_LEN:-}" ] && CMD+=" --max-model-len ${VLLM_MAX_MODEL_LEN}"
CMD+=" --gpu-memory-utilization 0.9"

export VLLM_NO_USAGE_STATS=1
echo "Running: ${CMD}"
eval "${CMD}"
