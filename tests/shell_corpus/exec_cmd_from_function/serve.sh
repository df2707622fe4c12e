#!/bin/bash
set -e
build_cmd() {
    local tp=$1
    echo -n "python3 -m vllm.entrypoints.openai.api_server --model /models/Qwen2-57B-A14B-Instruct"
    echo -n " --tensor-parallel-size $tp --enable-expert-parallel"
    if [ "$tp" -gt 4 ]; then
        echo -n " --max-num-batched-tokens 32768"
    fi
    echo " --port 8000"
}

export VLLM_USE_DEEP_GEMM=1
CMD=$(build_cmd "${TP:-8}")
exec ${CMD}
