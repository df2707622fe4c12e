#!/bin/bash
# TensorRT-LLM generation server for disaggregated serving (gen side).
set -euo pipefail

ENGINE_DIR=${ENGINE_DIR:-/engines/llama-3.1-8b-fp8}
CONFIG=${CONFIG:-$(pwd)/gen_config.yml}
GEN_TP=${GEN_TP:-2}

python3 prepare.py "$CONFIG" "$GEN_TP"
[ -z "${TRTLLM_USE_UCX_KVCACHE:-}" ] || export UCX_MAX_RNDV_RAILS=1
[[ -f "$CONFIG" ]] || { echo "missing $CONFIG" >&2; exit 1; }

export TRTLLM_USE_MPI_KVCACHE=1
export TLLM_LOG_LEVEL=INFO

nohup trtllm-serve "$ENGINE_DIR" \
    --host 0.0.0.0 \
    --port 8002 \
    --backend pytorch \
    --tp_size "$GEN_TP" \
    --extra_llm_api_options "$CONFIG" > gen_server.log 2>&1 &

for _ in $(seq 1 30); do
    curl -sf http://127.0.0.1:8002/health > /dev/null && break
    sleep 2
done
export TLLM_LOG_LEVEL=DEBUG
wait
