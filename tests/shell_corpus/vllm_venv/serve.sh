#!/bin/bash
# vLLM OpenAI-compatible server for Llama-3.3-70B (FP8), one node, all GPUs.
set -eo pipefail

source .venv/bin/activate

MODEL=${MODEL:-/models/Llama-3.3-70B-Instruct-FP8}
QUANT=fp8
export HF_HOME=~/.cache/huggingface
export VLLM_CACHE_ROOT=${HF_HOME}/vllm

# The torch in this venv must see CUDA, or vLLM falls back to CPU silently.
python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA"'

NUM_GPUS=$(nvidia-smi -L | wc -l)
if [[ "$QUANT" == fp8 ]]; then export VLLM_USE_DEEP_GEMM=1; else export VLLM_USE_DEEP_GEMM=0; fi

exec vllm serve "$MODEL" \
    --tensor-parallel-size "$NUM_GPUS" \
    --quantization "$QUANT" \
    --max-model-len 65536 \
    --gpu-memory-utilization 0.92 \
    --served-model-name llama-3.3-70b \
    --port 8000
