#!/bin/bash
# Prefill instance pinned to one NUMA node (two instances per host, one per socket).
set -euo pipefail

NUMA_NODE=${NUMA_NODE:-0}
GPU_LIST=${GPU_LIST:-0,1,2,3}
PORT=$((30000 + NUMA_NODE))

export CUDA_VISIBLE_DEVICES=$GPU_LIST
export OMP_NUM_THREADS=$(nproc)
[[ -n "${IB_DEVICE:-}" ]] && export NCCL_IB_HCA=$IB_DEVICE
[[ "${NUMA_NODE}" == 1 ]] && export NCCL_SOCKET_IFNAME=ens2f1

echo "prefill on NUMA node ${NUMA_NODE}, GPUs ${GPU_LIST}, port ${PORT}"
numactl --cpunodebind="$NUMA_NODE" --membind="$NUMA_NODE" \
    python3 -m sglang.launch_server \
    --model-path /models/Qwen3-235B-A22B \
    --tp 4 \
    --port "$PORT" \
    --disaggregation-mode prefill \
    --disaggregation-transfer-backend mooncake
