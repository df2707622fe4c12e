#!/bin/bash
ENV_FILE=${ENV_FILE:-config/serving.env}
if [ -f "$ENV_FILE" ]; then
    export $(cat "$ENV_FILE" | sed 's/#.*//g' | xargs)
fi
export MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
exec vllm serve "$MODEL" --max-model-len "$MAX_MODEL_LEN" --port "${PORT}" \
    --gpu-memory-utilization "$GPU_UTIL"
