#!/bin/bash
#SBATCH --job-name=serve-llm
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
# the allocation's hosts, as scontrol would list them, one string
NODES_STR=${NODES_STR:-"gpu-a01 gpu-a02"}
read -r -a NODES <<< "$NODES_STR"
HEAD_NODE=${NODES[0]}
export MASTER_ADDR=$HEAD_NODE
export MASTER_PORT=${MASTER_PORT:-29500}
declare -i NNODES=${#NODES[@]}
export WORLD_SIZE=$(( NNODES * 8 ))
exec torchrun --nnodes "$NNODES" --nproc-per-node 8 \
    --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" serve_model.py --port 8000
