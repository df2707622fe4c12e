#!/bin/bash
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
source <(python3 "$HERE/make_env.py" --gpus "${GPUS:-8}")
export TLLM_OVERRIDE_LAYER_NUM=0
exec trtllm-serve /engines/mixtral-8x7b --tp_size "$TP" --ep_size "$EP" --port 8000
