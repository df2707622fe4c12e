#!/bin/bash
#SBATCH --job-name=sglang-2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --time=12:00:00

HEAD=${HEAD_ADDR:-gpu-node-001}
NNODES=${SLURM_NNODES:-2}
export NCCL_IB_GID_INDEX=3
export NCCL_DEBUG=WARN

if [ "${SLURM_NODEID:-0}" -eq 0 ]; then
    echo "head node"
    ROLE_FLAGS="--host 0.0.0.0 --port 30000"
else
    ROLE_FLAGS="--skip-server-warmup"
    export SGLANG_BLOCK_NONZERO_RANK_CHILDREN=0
fi

python3 -m sglang.launch_server --model-path /lustre/models/Qwen3-235B-A22B \
    --tp $((8 * NNODES)) --nnodes "$NNODES" --node-rank "${SLURM_NODEID:-0}" \
    --dist-init-addr "$HEAD:5000" --trust-remote-code $ROLE_FLAGS
