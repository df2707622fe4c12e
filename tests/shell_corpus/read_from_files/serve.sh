#!/bin/bash
cd "$(dirname "$0")"
read -r MODEL_PATH < model.txt
read -r TP PP <<< "$(python3 -c 'print(4, 2)')"
export MODEL_PATH
export VLLM_PP_LAYER_PARTITION=${VLLM_PP_LAYER_PARTITION:-}
vllm serve "$MODEL_PATH" --tensor-parallel-size "$TP" --pipeline-parallel-size "$PP" --port 8000
