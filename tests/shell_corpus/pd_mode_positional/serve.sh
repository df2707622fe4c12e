#!/bin/bash
usage() {
    echo "Usage: $0 <prefill|decode> [node_rank]"
    exit 1
}

if [ $# -lt 1 ]; then
    usage
fi
mode=$1
rank=${2:-0}
if [ "$mode" != "prefill" ] && [ "$mode" != "decode" ]; then
    usage
fi

export SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256
if [ "$mode" = "prefill" ]; then
    export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=1800
    python3 -m sglang.launch_server --model-path /models/DeepSeek-R1 --disaggregation-mode prefill \
        --tp 16 --dp 16 --enable-dp-attention --nnodes 2 --node-rank "$rank" \
        --dist-init-addr 10.0.0.5:5757 --port 30000 --chunked-prefill-size 65536
else
    export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=1800
    export SGLANG_NUM_RESERVED_DECODE_TOKENS=102
    python3 -m sglang.launch_server --model-path /models/DeepSeek-R1 --disaggregation-mode decode \
        --tp 16 --dp 16 --enable-dp-attention --nnodes 2 --node-rank "$rank" \
        --dist-init-addr 10.0.0.6:5757 --port 30001 --cuda-graph-bs 1 2 4 8 16 32
fi
