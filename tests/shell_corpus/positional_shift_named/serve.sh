#!/bin/bash
# serve.sh MODEL [PORT] [TP] [--quantization Q] [--chat-template FILE]
model_id=${1}
port=${2:-8000}
tp_size=${3:-1}
shift 3

while [[ "$#" -gt 0 ]]; do
    case $1 in
        --quantization) quantization="$2"; shift ;;
        --chat-template) chat_template="$2"; shift ;;
        *) echo "unknown option: $1" >&2; exit 1 ;;
    esac
    shift
done

export VLLM_WORKER_MULTIPROC_METHOD=spawn
extra=()
[[ -n "${quantization:-}" ]] && extra+=(--quantization "$quantization")
[[ -n "${chat_template:-}" ]] && extra+=(--chat-template "$chat_template")

echo "serving $model_id on port $port with tp=$tp_size"
exec vllm serve "$model_id" --port "$port" --tensor-parallel-size "$tp_size" "${extra[@]}"
