#!/bin/bash
declare -x HF_HOME=/mnt/cache/hf
typeset -x TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_CACHE=/mnt/cache/hf/transformers
export -n TRANSFORMERS_CACHE
declare -i WORKERS=2*4
export WORKERS
exec python3 -m vllm.entrypoints.openai.api_server --model /models/bge-m3 --task embed \
    --port 8080 --max-num-seqs "$WORKERS"
