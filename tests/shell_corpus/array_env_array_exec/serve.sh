#!/bin/bash
# vLLM with the settings of each kind of run kept in two arrays: the
# environment (through env) and the arguments.
set -e

MODEL=/models/Mistral-Large-Instruct-2411
ENVS=(
    VLLM_USE_V1=1
    "NCCL_DEBUG=WARN"
    VLLM_ATTENTION_BACKEND=FLASHINFER
)
ARGS=(--tensor-parallel-size 8 --max-model-len 65536)

if [ "${PROFILE:-0}" = 1 ]; then
    ENVS+=(VLLM_TORCH_PROFILER_DIR=/scratch/vllm-prof)
    ARGS+=(--max-num-seqs 8)
else
    ARGS+=(--max-num-seqs 256 --enable-chunked-prefill)
fi
ARGS+=(--port "${PORT:-8000}" --served-model-name mistral-large)

export HF_HUB_OFFLINE=1
exec env "${ENVS[@]}" vllm serve "$MODEL" "${ARGS[@]}"
