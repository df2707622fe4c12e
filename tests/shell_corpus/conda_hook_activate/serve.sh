#!/bin/bash
# Activate the serving environment, then start vLLM in it.
CONDA_ROOT=${CONDA_ROOT:-$PWD/miniconda3}
eval "$("$CONDA_ROOT/bin/conda" shell.bash hook)"
conda activate serve

export VLLM_WORKER_MULTIPROC_METHOD=spawn
export CUDA_DEVICE_MAX_CONNECTIONS=1
python -m vllm.entrypoints.openai.api_server --model /models/Yi-1.5-34B-Chat --port 8000 \
    --tensor-parallel-size 2
