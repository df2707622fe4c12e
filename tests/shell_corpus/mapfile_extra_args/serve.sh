#!/bin/bash
cd "$(dirname "$0")"
mapfile -t EXTRA < <(grep -v '^#' extra_args.txt)
export SGLANG_USE_MODELSCOPE=false
exec python3 -m sglang.launch_server --model-path /models/glm-4-9b-chat --trust-remote-code \
    "${EXTRA[@]}"
