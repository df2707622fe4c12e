#!/bin/bash
DEFAULT_MODEL=Qwen/Qwen2.5-3B-Instruct
read -p "Model to serve [$DEFAULT_MODEL]: " MODEL
MODEL=${MODEL:-$DEFAULT_MODEL}
read -p "Port [8000]: " PORT
PORT=${PORT:-8000}
export MODEL PORT
export VLLM_LOGGING_LEVEL=INFO
vllm serve "$MODEL" --port "$PORT" --max-model-len 4096
