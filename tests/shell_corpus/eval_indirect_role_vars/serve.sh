#!/bin/bash
# One script for both halves of a PD pair; ROLE picks the port and GPUs.
ROLE=${1:-prefill}
MODEL=/models/DeepSeek-V2-Lite-Chat

prefill_port=30000
prefill_gpus=0,1,2,3
decode_port=30001
decode_gpus=4,5,6,7

eval "PORT=\$${ROLE}_port"
eval "export CUDA_VISIBLE_DEVICES=\$${ROLE}_gpus"
eval "export SGLANG_${ROLE^^}_STARTED=1"

echo "starting ${ROLE} on GPUs ${CUDA_VISIBLE_DEVICES}, port ${PORT}"
python3 -m sglang.launch_server --model-path "$MODEL" --trust-remote-code \
    --disaggregation-mode "$ROLE" --port "$PORT" --tp 4 \
    --disaggregation-transfer-backend nixl
