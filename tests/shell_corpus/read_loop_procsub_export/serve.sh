#!/bin/bash
# Tuning variables live in tuning.env (KEY=VALUE, # comments); the ones for
# this GPU type are exported before the server starts.
set -eo pipefail
cd "$(dirname "$0")"

GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
case "$GPU" in
    *H100*) TAG=h100 ;;
    *A100*) TAG=a100 ;;
    *)      TAG=any ;;
esac

while read -r kv; do export "$kv"; done < <(grep -E "^(any|$TAG)\." tuning.env | cut -d. -f2-)

export SGLANG_GPU_TAG=$TAG
python3 -m sglang.launch_server --model-path /models/gemma-2-27b-it \
    --tp 2 --port 30000 --attention-backend triton
