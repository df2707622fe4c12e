#!/usr/bin/env bash
# run from the checkout: ./serve.sh
set -euo pipefail
source .venv/bin/activate
export VLLM_USE_V1=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
vllm serve ./checkpoints/merged --served-model-name assistant --port 8000 --max-model-len 8192
