#!/bin/bash
# Prefill server whose output also goes to a dated log file.
set -euo pipefail

cd "$(dirname "$0")"
. ./common.sh
source lib/nccl.sh

LOG_DIR=${LOG_DIR:-$PWD/logs}
mkdir -p "$LOG_DIR"
LOG_FILE="$LOG_DIR/prefill-$(date +%Y%m%d).log"

export SGLANG_PREFILL_NODE=$(hostname)
export NCCL_DEBUG_FILE="${LOG_DIR}/nccl.%h.%p.log"

echo "logging to $LOG_FILE"
python3 -m sglang.launch_server \
    --model-path "$MODEL_PATH" \
    --tp "$TP" \
    --disaggregation-mode prefill \
    --port 30000 2>&1 | tee -a "$LOG_FILE"
