# shellcheck shell=bash
# eos: 4 GPUs a node, no InfiniBand on the serving partition
TP=4
MAX_BATCH=64
export NCCL_IB_DISABLE=1
export NCCL_SOCKET_IFNAME=eth0
SITE_ARGS="--kv_cache_free_gpu_memory_fraction 0.85 --trust_remote_code"
