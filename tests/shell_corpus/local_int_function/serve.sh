#!/bin/bash
start_server() {
    local -i tp=${TP:-4}
    local -i port=30000+tp
    declare -gx OMP_NUM_THREADS=$(( $(nproc) / tp + 1 ))
    declare -ix SGLANG_TP_SIZE=tp
    exec python3 -m sglang.launch_server --model-path /models/Qwen2.5-72B-Instruct \
        --tp "$tp" --port "$port"
}
export CUDA_DEVICE_MAX_CONNECTIONS=1
start_server "$@"
