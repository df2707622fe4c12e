#!/bin/bash
set -euo pipefail
OPTS=$(getopt -o m:p: --long model:,port:,quant: -n serve.sh -- "$@")
eval set -- "$OPTS"

MODEL=/models/llama
PORT=8000
QUANT=""
while true; do
    case "$1" in
        -m|--model) MODEL=$2; shift 2 ;;
        -p|--port) PORT=$2; shift 2 ;;
        --quant) QUANT=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "unexpected $1" >&2; exit 2 ;;
    esac
done

export VLLM_USE_MODELSCOPE=False
exec vllm serve "$MODEL" --port "$PORT" ${QUANT:+--quantization "$QUANT"} "$@"
