#!/bin/bash
# Decode worker for SGLang prefill/decode disaggregation.
# The knobs below are overridden per cluster through decode.env.
set -euo pipefail

cd "$(dirname "$0")"

# decode.env carries the cluster's secrets and endpoints, one KEY=VALUE a line.
export $(grep -v '^#' decode.env | xargs)

: "${DIST_INIT_ADDR:=10.20.0.11:5757}"
export DIST_INIT_ADDR
: "${NNODES:=2}"
NODE_RANK=${NODE_RANK:-0}

ARGS=(
    --model-path "${MODEL_PATH}"
    --disaggregation-mode decode
    --tp-size 16
    # every rank joins the same NCCL group
    --dist-init-addr "$DIST_INIT_ADDR"
    --nnodes "$NNODES"
    --node-rank "$NODE_RANK"
)
ARGS+=(--port "${DECODE_PORT:-30001}" --host 0.0.0.0)

if [[ "${ENABLE_DP_ATTENTION:-0}" == 1 ]]; then
    ARGS+=(--enable-dp-attention --dp-size 16)
    export SGLANG_DP_ATTENTION=1
fi

[[ -n "${CUDA_GRAPH_MAX_BS:-}" ]] && ARGS+=(--cuda-graph-max-bs "$CUDA_GRAPH_MAX_BS")

echo "decode rank ${NODE_RANK}/${NNODES}: ${ARGS[*]}"
python3 -m sglang.launch_server "${ARGS[@]}"
