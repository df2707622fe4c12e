#!/bin/bash
PRESET=${PRESET:-balanced}
case "$PRESET" in
    latency)
        : "${MAX_SEQS:=16}"
        : "${CHUNK:=2048}"
        ;;
    balanced)
        : "${MAX_SEQS:=128}"
        : "${CHUNK:=8192}"
        ;;
    throughput)
        : "${MAX_SEQS:=512}"
        : "${CHUNK:=16384}"
        export VLLM_ENABLE_V1_MULTIPROCESSING=1
        ;;
esac
export MAX_SEQS CHUNK
exec vllm serve /models/Mistral-Small-24B-Instruct --max-num-seqs "$MAX_SEQS" \
    --max-num-batched-tokens "$CHUNK" --enable-chunked-prefill --port 8000
