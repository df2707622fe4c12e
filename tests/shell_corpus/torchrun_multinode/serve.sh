#!/bin/bash
# Multi-node tensor-parallel inference server started with torchrun.
# NODE_RANK comes from the scheduler; everything else has a default.
set -euo pipefail

NNODES=${NNODES:-2}
NPROC_PER_NODE=${NPROC_PER_NODE:-8}
MASTER_ADDR=${MASTER_ADDR:-10.1.0.10}
RDZV_ID="serve-$(hostname)-${NODE_RANK:?NODE_RANK must be set}"

export OMP_NUM_THREADS=$(nproc)
export NCCL_ASYNC_ERROR_HANDLING=1
export TORCH_NCCL_BLOCKING_WAIT=0
[ -z "${MASTER_PORT:-}" ] || export MASTER_PORT
[ -n "${NCCL_IB_DISABLE:-}" ] || export NCCL_IB_DISABLE=0

echo "node ${NODE_RANK}/${NNODES} rdzv ${RDZV_ID}"
exec torchrun \
    --nnodes "$NNODES" \
    --nproc-per-node "$NPROC_PER_NODE" \
    --node-rank "$NODE_RANK" \
    --rdzv-backend c10d \
    --rdzv-endpoint "${MASTER_ADDR}:${MASTER_PORT:-29500}" \
    --rdzv-id "$RDZV_ID" \
    serve.py --model /models/Meta-Llama-3.1-405B-Instruct --max-batch-size 32
