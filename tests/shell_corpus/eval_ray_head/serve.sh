#!/bin/bash
ROLE=${ROLE:-head}
HEAD_IP=${HEAD_IP:-10.0.0.1}

if [ "$ROLE" = "head" ]; then
    START="ray start --head --port=6379 --num-gpus=8 >/dev/null 2>&1 || true"
    SERVE="vllm serve /models/Qwen2.5-72B-Instruct --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray"
else
    START="ray start --address=$HEAD_IP:6379 --num-gpus=8 --block"
    SERVE=""
fi

export VLLM_HOST_IP=$(hostname -I 2>/dev/null | awk '{print $1}')
eval "$START"
[ -n "$SERVE" ] && eval "$SERVE --port 8000"
