#!/bin/bash
# One script for every SGLang PD role; ROLE comes from the unit's Environment=.
set -euo pipefail

ROLE=${ROLE:-prefill}
MODEL_PATH=/models/DeepSeek-V3
EXTRA_ARGS=()

if [[ "$ROLE" == prefill ]]; then
    PORT=30000
    export SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=8
    EXTRA_ARGS+=(--disaggregation-mode prefill --chunked-prefill-size 16384)
elif [[ "$ROLE" == decode ]]; then
    PORT=30001
    export SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL=5
    EXTRA_ARGS+=(--disaggregation-mode decode)
    EXTRA_ARGS+=(--cuda-graph-max-bs 256)
else
    echo "unknown ROLE=$ROLE" >&2
    exit 2
fi

export MC_TE_METRIC=true
export SGLANG_HOST_IP=$(hostname)

numactl --interleave=all python3 -m sglang.launch_server \
    --model-path "$MODEL_PATH" \
    --tp 8 \
    --port "$PORT" \
    --disaggregation-ib-device "${IB_DEVICE:-mlx5_0}" \
    "${EXTRA_ARGS[@]}"
