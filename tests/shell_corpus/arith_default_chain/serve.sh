#!/bin/bash
DEFAULT_TP=1
TP=${TP:-$DEFAULT_TP}
MAX_LEN=${MAX_MODEL_LEN:-$((TP * 8192))}
BLOCK=${BLOCK_SIZE:-16}

if (( TP > 1 )); then
    export NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE:-0}
    export VLLM_WORKER_MULTIPROC_METHOD=spawn
fi

vllm serve /models/Llama-3.1-70B-Instruct \
    --tensor-parallel-size $TP \
    --max-model-len $MAX_LEN \
    --block-size $BLOCK \
    --port 8000
