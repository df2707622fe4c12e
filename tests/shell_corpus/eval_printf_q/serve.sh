#!/usr/bin/env bash
# TensorRT-LLM OpenAI server for an engine directory
ENGINE_DIR=${ENGINE_DIR:-/engines/llama-8b-fp8}
TOKENIZER=${TOKENIZER:-/models/Meta-Llama-3.1-8B-Instruct}

opts=$(printf ' %q' --tokenizer "$TOKENIZER" --host 0.0.0.0 --port "${PORT:-8000}")
opts+=" --backend pytorch --max_batch_size ${MAX_BS:-128}"

export TLLM_LOG_LEVEL=INFO
eval "exec trtllm-serve $ENGINE_DIR $opts"
