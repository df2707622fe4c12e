#!/bin/bash
LEN=${LEN:-8192}
ARGS=()
ARGS+=("--model=/models/Mistral-7B-Instruct-v0.3")
ARGS+=("--max-model-len=${LEN}")
ARGS+=("--gpu-memory-utilization=0.88")
if [[ -n "${TOOL_PARSER:-}" ]]; then
    ARGS+=("--enable-auto-tool-choice" "--tool-call-parser=${TOOL_PARSER}")
fi
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True
exec python3 -m vllm.entrypoints.openai.api_server "${ARGS[@]}"
