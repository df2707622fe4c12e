#!/bin/bash
# SGLang with data parallelism; tp/dp default per host, .env may pin them.
set -euo pipefail

export SGLANG_ENABLE_JIT_DEEPGEMM=0
export NCCL_DEBUG=WARN

set -a
source .env
set +a

: "${TP:=4}"
: "${DP:=2}"
: "${MAX_RUNNING_REQUESTS:=1024}"
export TP DP
export MODEL_PATH=${MODEL_PATH:-/models/Qwen3-32B}

python3 -m sglang.launch_server \
    --model-path "$MODEL_PATH" \
    --tp "$TP" \
    --dp "$DP" \
    --max-running-requests "$MAX_RUNNING_REQUESTS" \
    --load-balance-method round_robin \
    --port 30000
