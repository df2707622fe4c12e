#!/bin/bash
set -e
NUM_GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
echo "found $NUM_GPUS GPUs"

case "$NUM_GPUS" in
    8) TP=8; export NCCL_NVLS_ENABLE=1 ;;
    4) TP=4 ;;
    2) TP=2 ;;
    *) TP=1; export VLLM_ENFORCE_EAGER=1 ;;
esac

export VLLM_ATTENTION_BACKEND=FLASHINFER
exec vllm serve /models/Llama-3.3-70B-Instruct --tensor-parallel-size "$TP" --port 8000 \
    --max-model-len 32768
