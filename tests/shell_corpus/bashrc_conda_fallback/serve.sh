#!/bin/bash
[ -f ~/.bashrc ] && source ~/.bashrc
conda activate lmdeploy 2>/dev/null || echo "conda not available, using system python"

export HF_ENDPOINT=https://hf-mirror.com
export LMDEPLOY_LOG_LEVEL=INFO
python3 -m vllm.entrypoints.openai.api_server --model /models/internlm2-chat-20b \
    --trust-remote-code --port 23333 --served-model-name internlm2
