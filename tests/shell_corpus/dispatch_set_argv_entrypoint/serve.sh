#!/usr/bin/env bash
# Image entrypoint: `serve` (default) starts the OpenAI server, `api` the
# legacy one, anything else runs as given (bash, python3 -c ..., nvidia-smi).
set -o errexit

MODEL="${MODEL:-/models/Qwen2.5-14B-Instruct}"
export HF_HUB_OFFLINE=1

if [ "$#" -eq 0 ]; then
    set -- serve
fi

case "$1" in
    serve)
        shift
        set -- vllm serve "$MODEL" --host 0.0.0.0 --port 8000 "$@"
        ;;
    api)
        shift
        set -- python3 -m vllm.entrypoints.api_server --model "$MODEL" "$@"
        ;;
    -*)
        set -- vllm serve "$MODEL" "$@"
        ;;
esac

echo "entrypoint: $*"
exec "$@"
