#!/bin/bash
# SGLang on the H200 boxes. The NCCL settings came from the network team:
# keep them one per line so that a diff shows which one changed.
set -euo pipefail

export NCCL_IB_HCA=mlx5_0,mlx5_3,mlx5_4,mlx5_5 \
    NCCL_IB_QPS_PER_CONNECTION=4 \
    NCCL_SOCKET_IFNAME=eth0 \
    NCCL_MIN_NCHANNELS=4
export GLOO_SOCKET_IFNAME=eth0 TP_SOCKET_IFNAME=eth0

set -a
SGLANG_SET_CPU_AFFINITY=1
MC_TE_METRIC=true
set +a

declare -x CUDA_MODULE_LOADING=LAZY
[[ "${USE_IB:-1}" == 1 ]] || export NCCL_IB_DISABLE=1
NCCL_IB_QPS_PER_CONNECTION=8

python3 -m sglang.launch_server \
    --model-path /models/Qwen2.5-VL-72B-Instruct \
    --tp 8 \
    --chat-template qwen2-vl \
    --port 30000 &

wait
