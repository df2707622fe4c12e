# shellcheck shell=bash
SITE=${SITE:-default}
MODEL=${MODEL:-/models/Llama-3.3-70B-Instruct}
PORT=8000
TP=8
MAX_BATCH=128
SITE_ARGS=""
export TLLM_LOG_LEVEL=INFO
export NCCL_IB_DISABLE=0

log() { printf '[serve %s] %s\n' "$(date +%T)" "$*"; }

source "$(dirname "${BASH_SOURCE[0]}")/site/${SITE}.sh"
