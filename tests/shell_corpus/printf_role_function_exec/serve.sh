#!/bin/bash
# One script for both halves of a prefill/decode pair; ROLE picks the half.
MODEL=/models/DeepSeek-V2-Lite-Chat

launch_cmd() {
    local role=$1
    printf '%s' "python3 -m sglang.launch_server --model-path $MODEL --trust-remote-code"
    if [ "$role" = prefill ]; then
        printf ' %s' --disaggregation-mode prefill --port 30000
    else
        printf ' %s' --disaggregation-mode decode --port 30001
        printf ' %s' --mem-fraction-static 0.85
    fi
    printf '\n'
}

export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600
exec $(launch_cmd "${ROLE:-prefill}")
