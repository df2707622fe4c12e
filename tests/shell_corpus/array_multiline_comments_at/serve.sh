#!/bin/bash
# trtllm-serve with the PyTorch backend; LLM API options go through a YAML
# file written here; extra options from the command line are appended.
set -euo pipefail

MODEL=${MODEL:-/models/Llama-3.1-8B-Instruct-FP8}
OPTS_FILE=$(pwd)/extra-llm-api-config.yml

cat > "$OPTS_FILE" <<EOF_YAML
enable_attention_dp: false
cuda_graph_config:
  max_batch_size: 256
kv_cache_config:
  free_gpu_memory_fraction: ${KV_FRACTION:-0.9}
EOF_YAML

ARGS=(
    "$MODEL"
    --host 0.0.0.0
    --port 8000
    # --log_level debug
    --backend pytorch
    --max_batch_size 256
    --max_num_tokens 8192
    --extra_llm_api_options "$OPTS_FILE"
)
if [[ ${TP:-1} -gt 1 ]]; then
    ARGS+=(--tp_size "$TP")
fi
ARGS+=("$@")

export TRTLLM_ENABLE_PDL=1
echo "trtllm-serve ${ARGS[*]}"
exec trtllm-serve "${ARGS[@]}"
