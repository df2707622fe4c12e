#!/bin/bash
# Serve a model with vLLM; every knob can come from the environment.
MODEL=${MODEL:-meta-llama/Llama-3.1-8B-Instruct}
PORT=${PORT:-8000}
TP=${TP:-1}
MAX_LEN=${MAX_LEN:-16384}

export VLLM_WORKER_MULTIPROC_METHOD=spawn
export HF_HUB_ENABLE_HF_TRANSFER=1

CMD="vllm serve $MODEL --host 0.0.0.0 --port $PORT"
CMD="$CMD --tensor-parallel-size $TP --max-model-len $MAX_LEN"
if [ "${ENABLE_PREFIX_CACHING:-1}" = "1" ]; then
    CMD="$CMD --enable-prefix-caching"
fi

echo "Running: $CMD"
eval "$CMD"
