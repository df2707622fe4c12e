#!/bin/bash
# Worker side of a two-node torchrun server: the head writes "host:port" to
# the shared run folder; every other node reads it before joining.
set -euo pipefail

RUN_DIR=${RUN_DIR:-$(dirname "$0")/shared}
ADDR_FILE="$RUN_DIR/head.addr"

for _ in $(seq 1 60); do
    [ -s "$ADDR_FILE" ] && break
    sleep 5
done

IFS=: read -r MASTER_ADDR MASTER_PORT < "$ADDR_FILE"
read -r NCCL_SOCKET_IFNAME _ < "$RUN_DIR/ifname"
read -r GPUS < <(nvidia-smi -L | wc -l)
export MASTER_ADDR MASTER_PORT NCCL_SOCKET_IFNAME

NODE_RANK=${NODE_RANK:-1}
exec torchrun --nnodes 2 --node-rank "$NODE_RANK" --nproc-per-node "$GPUS" \
    --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" \
    serve_dist.py --model /models/Mixtral-8x22B --port 9000
