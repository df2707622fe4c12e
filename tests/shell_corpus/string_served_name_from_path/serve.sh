#!/bin/bash
# Serve whatever checkpoint directory is given; the served name, the
# quantization and the TP size are all read off strings.
set -euo pipefail

MODEL_DIR=${1:?usage: serve.sh /models/<org>/<name>}
MODEL_DIR=${MODEL_DIR%/}
NAME=${MODEL_DIR##*/}
SERVED=${NAME,,}
SUFFIX=${SERVED##*-}

case "$SUFFIX" in
    awq|gptq) QUANT_ARGS="--quantization $SUFFIX" ;;
    fp8)      QUANT_ARGS="--kv-cache-dtype fp8" ;;
    *)        QUANT_ARGS="" ;;
esac

DEVICES=${CUDA_VISIBLE_DEVICES:-0}
IDS=${DEVICES//,/}
TP=${#IDS}

export VLLM_CONFIG_ROOT="/var/lib/vllm/${SERVED//./_}"
exec vllm serve "$MODEL_DIR" --served-model-name "$SERVED" \
    --tensor-parallel-size "$TP" $QUANT_ARGS --port 8000
