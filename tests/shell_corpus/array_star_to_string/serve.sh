#!/bin/bash
NPROC=${NPROC:-4}
SERVER_ARGS=(
    --model /models/llava-v1.6-34b
    --port 9001
    --max-batch-size 16
)
if [ "${FP8:-0}" = 1 ]; then
    SERVER_ARGS+=(--fp8)
fi
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
CMD="torchrun --nproc_per_node $NPROC --master_port 29501 serve_mm.py ${SERVER_ARGS[*]}"
echo "$CMD"
exec $CMD
