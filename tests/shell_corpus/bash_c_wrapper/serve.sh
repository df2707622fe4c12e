#!/bin/bash
# Start the decode server through a login-like shell so that the module
# environment of the cluster (CUDA, NCCL) is set up the way the docs say.
set -euo pipefail

WORKDIR=${WORKDIR:-$(pwd)/run}
MODEL=${MODEL:-/models/Llama-4-Maverick-17B-128E-Instruct-FP8}
export NCCL_NVLS_ENABLE=0

mkdir -p "${WORKDIR}"

bash -c "
  export SGLANG_ENABLE_TORCH_COMPILE=0
  export TP_SIZE=8
  cd '${WORKDIR}' &&
  exec python3 -m sglang.launch_server --model-path '${MODEL}' \
      --tp \$TP_SIZE --context-length 131072 \
      --port 30001
"
