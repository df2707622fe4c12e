#!/bin/bash
#SBATCH --job-name=sgl-2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
# Two-node SGLang; every node runs this with its own SLURM_NODEID.

NODES=${SLURM_JOB_NODELIST:-localhost}
HEAD=${NODES%%,*}
COMMAS=${NODES//[^,]/}
NNODES=$(( ${#COMMAS} + 1 ))
RANK=${SLURM_NODEID:-0}

DIST_ADDR="${HEAD}.${CLUSTER_DOMAIN:-ib.cluster}:5757"
LOG=logs/sgl_${SLURM_JOB_ID:-local}_n${RANK}.log
mkdir -p "${LOG%/*}"

export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-ib0}
export GLOO_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME

python3 -m sglang.launch_server --model-path /models/DeepSeek-R1 \
    --tp 16 --dist-init-addr "$DIST_ADDR" \
    --nnodes "$NNODES" --node-rank "$RANK" \
    --trust-remote-code --port 30000 2>&1 | tee "$LOG"
