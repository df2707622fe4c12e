#!/bin/bash
WORKDIR=/tmp
PORT=${PORT:-23333}
exec bash -c "cd $WORKDIR && export VLLM_ENABLE_V1_MULTIPROCESSING=0 &&
    python3 -m vllm.entrypoints.openai.api_server --model /models/internlm2_5-7b-chat \
    --trust-remote-code --port $PORT"
