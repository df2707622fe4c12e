#!/bin/bash
# usage: serve.sh {prefill|decode}
MODEL=/models/Llama-3.3-70B-Instruct
KV='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

start_prefill() {
    local CMD="CUDA_VISIBLE_DEVICES=0,1,2,3 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve $MODEL --port 8100 --tensor-parallel-size 4"
    CMD+=" --kv-transfer-config '$KV'"
    echo "$CMD"
    eval "$CMD"
}

start_decode() {
    local CMD="CUDA_VISIBLE_DEVICES=4,5,6,7 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve $MODEL --port 8200 --tensor-parallel-size 4"
    CMD+=" --kv-transfer-config '$KV' --max-num-seqs 128"
    eval "$CMD"
}

case "${1:-}" in
    prefill) start_prefill ;;
    decode) start_decode ;;
    *) echo "usage: $0 {prefill|decode}" >&2; exit 1 ;;
esac
