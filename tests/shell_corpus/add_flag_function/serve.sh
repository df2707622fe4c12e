#!/bin/bash
ARGS=()
add_flag() {
    ARGS+=("$@")
}

add_flag --model-path /models/Meta-Llama-3-8B-Instruct
add_flag --port 30000
if [ "${LORA:-0}" = 1 ]; then
    add_flag --lora-paths sql=/loras/sql chat=/loras/chat
    add_flag --max-loras-per-batch 4
fi
add_flag --log-requests
export SGLANG_LORA_BACKEND=triton
exec python3 -m sglang.launch_server "${ARGS[@]}"
