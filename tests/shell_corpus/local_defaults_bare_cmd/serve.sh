#!/bin/bash
# start one SGLang worker: serve [port] [model]
serve() {
    local port=${1:-30000}
    local model=${2:-/models/Qwen2.5-VL-7B-Instruct}
    local CMD="python3 -m sglang.launch_server --model-path $model --port $port"
    CMD="$CMD --chat-template qwen2-vl --mem-fraction-static 0.7"
    echo "[serve] $CMD"
    $CMD
}

export SGLANG_VLM_CACHE_SIZE_MB=2048
serve 30005
