#!/bin/bash
# vLLM decode node. Someone commented out the LoRA flag in the middle of the
# command: bash ends the command at the comment, so the flags under it are
# never passed (the exec has replaced the shell by the time they would run).
set -euo pipefail

usage() {
    cat <<'EOF'
Environment:
  export MODEL=/models/...      model to serve
  export MAX_LORAS=4            adapters kept on the GPU
EOF
}

[[ "${1:-}" == -h ]] && { usage; exit 0; }

MODEL=${MODEL:-/models/Llama-3.1-8B-Instruct}
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True

cat > /dev/null <<EOF
export MODEL=$MODEL
export NEVER_RUNS=1
EOF

exec env VLLM_RPC_TIMEOUT=20000 vllm serve "$MODEL" \
    --tensor-parallel-size 1 \
    --max-num-batched-tokens 8192 \
    # --enable-lora --max-loras 4 \
    --port 8200 \
    --api-key secret-token
