#!/usr/bin/env bash
# ./serve.sh --model=PATH [--tp=N] [--port=N] [--mem=F]
set -e
MODEL=/models/default
TP=1
PORT=30000
MEM=0.8

for arg in "$@"; do
  case "$arg" in
    --model=*) MODEL="${arg#*=}" ;;
    --tp=*) TP="${arg#*=}" ;;
    --port=*) PORT="${arg#*=}" ;;
    --mem=*) MEM="${arg#*=}" ;;
    *) echo "ignored: $arg" ;;
  esac
done

export SGLANG_LOG_LEVEL=info
exec python3 -m sglang.launch_server --model-path $MODEL --tp $TP --port $PORT \
  --mem-fraction-static $MEM --host 0.0.0.0
