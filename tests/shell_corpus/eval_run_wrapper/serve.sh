#!/bin/bash
set -euo pipefail

run() {
    echo "+ $*" >&2
    eval "$@"
}

NPROC=${NPROC:-$(nvidia-smi -L | wc -l)}
export OMP_NUM_THREADS=8
run "NCCL_DEBUG=WARN torchrun --standalone --nproc_per_node=$NPROC server.py --port 9000 --max-batch 64"
