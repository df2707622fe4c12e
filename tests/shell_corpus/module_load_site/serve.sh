#!/bin/bash
#SBATCH --nodes=1
#SBATCH --gpus-per-node=4
source ./site/modules.sh
module purge
module load cuda/12.4 nccl/2.21

export OMP_NUM_THREADS=16
torchrun --standalone --nproc_per_node 4 serve_llm.py --model /scratch/models/falcon-40b --port 7000
