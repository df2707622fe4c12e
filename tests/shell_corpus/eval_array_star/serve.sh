#!/bin/bash
set -u
MODEL_DIR=/mnt/models/gemma-2-27b-it

CMD=(python3 -m sglang.launch_server)
CMD+=(--model-path "$MODEL_DIR" --port 31000)
CMD+=(--attention-backend triton)
if [[ "${QUANT:-}" == fp8 ]]; then
  CMD+=(--quantization fp8)
fi
CMD+=(--log-level "${LOG_LEVEL:-info}")

export SGLANG_DISABLE_OUTLINES_DISK_CACHE=1
echo "${CMD[*]}" > last_cmd.txt
eval "${CMD[*]}"
