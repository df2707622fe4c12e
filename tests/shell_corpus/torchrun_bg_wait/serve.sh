#!/bin/bash
#SBATCH --job-name=serve-llm
#SBATCH --gpus=8
export MASTER_ADDR=${MASTER_ADDR:-localhost}
export MASTER_PORT=$((20000 + RANDOM % 10000))
export NCCL_ASYNC_ERROR_HANDLING=1
torchrun --nproc_per_node=8 --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT \
    inference_server.py --ckpt /ckpt/llama-65b --max-seq-len 2048 --port 5000 &
wait
