#!/usr/bin/env bash
set -eo pipefail
cd "$(dirname "$0")"

# the helper prints shell exports for this node (network interface, GPU count)
eval "$(python3 detect_env.py --shell)"
export SGLANG_ENABLE_JIT_DEEPGEMM=0

exec python3 -m sglang.launch_server --model-path "${MODEL_PATH:-Qwen/Qwen2.5-32B-Instruct}" \
  --tp "$NUM_GPUS" --host 0.0.0.0 --port 30000 --mem-fraction-static 0.85
