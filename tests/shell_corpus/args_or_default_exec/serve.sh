#!/usr/bin/env bash
set -euo pipefail
# Container entrypoint: run what the caller gives, else the default server.
[[ $# -gt 0 ]] && exec "$@"

cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1
echo "[entrypoint] starting the default server on ${PORT:-8000}"
exec python3 -m vllm.entrypoints.openai.api_server \
    --model "${MODEL:-/models/Llama-3.2-3B-Instruct}" \
    --host 0.0.0.0 \
    --port "${PORT:-8000}" \
    --max-num-seqs 32
