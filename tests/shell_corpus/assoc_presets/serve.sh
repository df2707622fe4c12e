#!/bin/bash
declare -A TP_FOR=([small]=1 [medium]=2 [large]=8)
declare -A MODEL_FOR=([small]=/models/Qwen3-4B [medium]=/models/Qwen3-14B [large]=/models/Qwen3-235B-A22B)
TIER=${TIER:-small}
export SGLANG_ENABLE_JIT_DEEPGEMM=$([ "$TIER" = large ] && echo 1 || echo 0)
exec python3 -m sglang.launch_server --model-path "${MODEL_FOR[$TIER]}" --tp "${TP_FOR[$TIER]}" \
    --port 30000 --reasoning-parser qwen3
