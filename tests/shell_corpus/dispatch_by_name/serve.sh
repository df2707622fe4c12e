#!/usr/bin/env bash
# ROLE selects start_<role>; any arguments are passed through to it.
set -euo pipefail

start_prefill() {
    export SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=4
    exec python3 -m sglang.launch_server --model-path /models/Qwen3-32B --disaggregation-mode prefill --port 30000 "$@"
}

start_decode() {
    export SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE=5
    exec python3 -m sglang.launch_server --model-path /models/Qwen3-32B --disaggregation-mode decode --port 30001 "$@"
}

ROLE=${ROLE:?ROLE must be prefill or decode}
declare -F "start_$ROLE" >/dev/null || { echo "no such role: $ROLE" >&2; exit 2; }
"start_$ROLE" "$@"
