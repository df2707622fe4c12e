#!/bin/bash
ARGS=("$@")
has() {
    local f
    for f in "${ARGS[@]}"; do [[ "$f" == "$1" || "$f" == "$1="* ]] && return 0; done
    return 1
}
has --port || ARGS+=(--port 8000)
has --host || ARGS+=(--host 0.0.0.0)
has --max-num-seqs || ARGS+=(--max-num-seqs 64)
export VLLM_CONFIGURE_LOGGING=0
exec python3 -m vllm.entrypoints.openai.api_server "${ARGS[@]}"
