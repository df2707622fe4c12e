#!/bin/bash
#SBATCH --nodes=2
read -r -a HOSTS <<< "${NODE_LIST:-gpu-a01 gpu-a02}"
HEAD=${HOSTS[0]}
NNODES=${#HOSTS[@]}
RANK=${SLURM_PROCID:-0}
export MASTER_ADDR=$HEAD MASTER_PORT=29500
torchrun --nnodes "$NNODES" --node_rank "$RANK" --master_addr "$MASTER_ADDR" \
    --master_port "$MASTER_PORT" --nproc_per_node 8 serve_dist.py --port 9000
