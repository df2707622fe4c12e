#!/bin/bash
MODEL=/models/Llama-4-Scout-17B-16E-Instruct
mkdir -p logs
export VLLM_DISABLE_COMPILE_CACHE=1
nohup python3 -m vllm.entrypoints.openai.api_server --model $MODEL --tensor-parallel-size 8 \
    --max-model-len 430000 --port 8000 2>&1 | tee logs/server.log &
echo "started; tail -f logs/server.log"
wait
