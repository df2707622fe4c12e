#!/bin/bash
set -e
cd "$(dirname "$0")"
CONDA=${CONDA_EXE:-./miniconda3/bin/conda}
export HF_HOME=/data/huggingface
export SGLANG_DISABLE_REQUEST_LOGGING=1
exec "$CONDA" run -n sglang --no-capture-output python -m sglang.launch_server \
    --model-path /models/Qwen2.5-Coder-32B-Instruct --port 30000 --tp 2
