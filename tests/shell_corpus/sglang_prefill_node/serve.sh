#!/usr/bin/env bash
# SGLang prefill worker for the PD-disaggregated DeepSeek deployment.
# Started by systemd (sglang-prefill.service) on every prefill node.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$SCRIPT_DIR/env.sh"

MODEL_PATH=${MODEL_PATH:-/models/DeepSeek-V3-0324}
: "${PORT:=30000}"
HOST_IP=${HOST_IP:-$(hostname)}
LOG_DIR=${LOG_DIR:-$SCRIPT_DIR/logs}
mkdir -p "$LOG_DIR"

log() {
    echo "[prefill $(date +%H:%M:%S)] $*"
}

# Fail early when the GPUs are not visible: the server would hang on NCCL init.
if ! nvidia-smi > /dev/null 2>&1; then
    log "nvidia-smi failed, refusing to start"
    exit 1
fi

export NCCL_IB_HCA=mlx5_0,mlx5_1 \
    NCCL_IB_GID_INDEX=3 \
    NCCL_SOCKET_IFNAME=bond0

log "starting prefill on ${HOST_IP}:${PORT} with ${MODEL_PATH}"
exec python3 -m sglang.launch_server \
    --model-path "$MODEL_PATH" \
    --host 0.0.0.0 \
    --port "$PORT" \
    --tp 8 \
    --trust-remote-code \
    --disaggregation-mode prefill \
    --disaggregation-ib-device mlx5_0 \
    --mem-fraction-static 0.85 \
    --log-requests-level 1 \
    # --enable-torch-compile \

