#!/bin/bash
set -e
case "${LAUNCHER:-cli}" in
    cli) CMD=(vllm serve /models/Llama-3.2-3B-Instruct) ;;
    module) CMD=(python3 -m vllm.entrypoints.openai.api_server --model /models/Llama-3.2-3B-Instruct) ;;
esac
CMD+=(--port 8000 --max-num-seqs 32)
if [[ "${NUMA:-}" == 1 ]]; then
    CMD=(numactl --cpunodebind=0 --membind=0 "${CMD[@]}")
fi
export OMP_NUM_THREADS=4
exec "${CMD[@]}"
