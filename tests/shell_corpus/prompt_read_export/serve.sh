#!/bin/bash
# usage: serve.sh [MODEL_DIR]; asks for what it is not given
MODEL_DIR=${1:-}
if [ -z "$MODEL_DIR" ]; then
    read -r -p "model directory: " MODEL_DIR
fi
export MODEL_DIR
read -r -t 1 -p "tensor parallel size [2]: " TP || true
TP=${TP:-2}
export TP
export VLLM_WORKER_MULTIPROC_METHOD=spawn
exec vllm serve "$MODEL_DIR" --tensor-parallel-size "$TP" --port 8000
