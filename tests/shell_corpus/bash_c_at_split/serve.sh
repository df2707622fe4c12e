#!/bin/bash
# Pass extra options through to vLLM.
export VLLM_RPC_TIMEOUT=100000
MODEL=/models/gemma-3-12b-it
exec bash -c "vllm serve $MODEL --port 8000 $@"
