#!/bin/bash
# LAUNCH_CMD may be overridden by the deployment; otherwise the default below.
export HF_HUB_OFFLINE=1
export VLLM_CACHE_ROOT=/cache/vllm
exec ${LAUNCH_CMD:-vllm serve /models/Phi-3.5-mini-instruct --port 8000 --max-num-seqs 48}
