#!/bin/bash
set -e
PROFILE=${PROFILE:-latency}
case "$PROFILE" in
  latency)
    : "${MAX_NUM_SEQS:=16}"
    : "${GPU_MEM:=0.85}"
    ;;
  throughput)
    : "${MAX_NUM_SEQS:=256}"
    : "${GPU_MEM:=0.95}"
    ;;
  *)
    echo "unknown profile $PROFILE" >&2
    exit 1
    ;;
esac
export MAX_NUM_SEQS GPU_MEM PROFILE
exec python3 -m vllm.entrypoints.openai.api_server --model /models/Mistral-7B-Instruct \
    --max-num-seqs "$MAX_NUM_SEQS" --gpu-memory-utilization "$GPU_MEM"
