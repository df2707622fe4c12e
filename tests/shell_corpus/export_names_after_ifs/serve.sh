#!/bin/bash
if ibv_devinfo >/dev/null 2>&1; then
    NCCL_IB_DISABLE=0
    NCCL_IB_HCA=mlx5
else
    NCCL_IB_DISABLE=1
fi
if [ "${DEBUG:-0}" = 1 ]; then
    NCCL_DEBUG=INFO
    NCCL_DEBUG_SUBSYS=INIT,NET
else
    NCCL_DEBUG=WARN
fi
NCCL_SOCKET_IFNAME=${IFACE:-eth0}
export NCCL_IB_DISABLE NCCL_IB_HCA NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_SOCKET_IFNAME

python3 -m sglang.launch_server --model-path /models/gemma-2-9b-it --tp 2 --port 30000
