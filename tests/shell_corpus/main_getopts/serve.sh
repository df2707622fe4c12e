#!/usr/bin/env bash
# Decode launcher with its own option parsing:
#   serve.sh --model PATH [--tp N] [--port N] [-- extra server args]
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$SCRIPT_DIR/env.sh"

MODEL=""
TP=8
PORT=30001
EXTRA=()

parse_args() {
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --model) MODEL=$2; shift 2 ;;
            --tp) TP=$2; shift 2 ;;
            --port) PORT=$2; shift 2 ;;
            --) shift; EXTRA=("$@"); break ;;
            *) echo "unknown option $1" >&2; exit 2 ;;
        esac
    done
    [[ -n "$MODEL" ]] || { echo "--model is required" >&2; exit 2; }
}

launch_decode() {
    export SGLANG_DECODE_PORT=$PORT
    exec python3 -m sglang.launch_server \
        --model-path "$MODEL" \
        --tp "$TP" \
        --port "$PORT" \
        --disaggregation-mode decode \
        "$@"
}

main() {
    parse_args "$@"
    if (( TP > 8 )); then
        export NCCL_ALGO=Ring
    elif (( TP == 8 )); then
        export NCCL_ALGO=Tree
    else
        unset NCCL_ALGO
    fi
    launch_decode --mem-fraction-static 0.88 "${EXTRA[@]}"
}

main "$@"
