#!/bin/bash
# vLLM started from a command string, as the old supervisor config did.
set -euo pipefail

MODEL=${MODEL:-/models/Phi-4}
TP=${TP:-2}
PORT=${PORT:-8100}
export VLLM_USE_V1=1
export VLLM_ENGINE_ITERATION_TIMEOUT_S=180

CMD="vllm serve $MODEL --tensor-parallel-size $TP --port $PORT"
CMD="$CMD --max-num-seqs 128 --enable-chunked-prefill"
[[ "${DEBUG:-0}" == 1 ]] && CMD+=" --enforce-eager"

echo "running: $CMD"
exec bash -c "$CMD"
