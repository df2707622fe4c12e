#!/bin/bash
set -e
MODE=${MODE:-throughput}
NGPU=$(nvidia-smi -L | wc -l)

case "$MODE" in
  latency)
    CMD="VLLM_USE_V1=1 python3 -m vllm.entrypoints.openai.api_server --model /data/models/mistral-small --tensor-parallel-size $NGPU --max-num-seqs 32"
    ;;
  throughput)
    CMD="VLLM_USE_V1=1 VLLM_ENABLE_V1_MULTIPROCESSING=1 python3 -m vllm.entrypoints.openai.api_server --model /data/models/mistral-small"
    CMD="$CMD --data-parallel-size $NGPU --max-num-seqs 512 --max-num-batched-tokens 16384"
    ;;
esac
CMD="$CMD --port ${PORT:-8080} --served-model-name mistral"
eval $CMD
