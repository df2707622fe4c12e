#!/usr/bin/env bash
# Two-node vLLM: ROLE=leader serves, ROLE=follower only joins. Set by the unit.
set -u

MODEL=/shared/models/Llama-3.1-405B-Instruct-FP8
if [[ "${ROLE:-leader}" == "leader" ]]; then
    export VLLM_HOST_IP=10.1.0.10
    export NCCL_SOCKET_IFNAME=ib0
    PP=2
    extra="--enable-chunked-prefill"
else
    export VLLM_HOST_IP=10.1.0.11
    export NCCL_SOCKET_IFNAME=ib1
    PP=1
    extra="--disable-log-stats"
fi

export GLOO_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME
vllm serve $MODEL --tensor-parallel-size 8 --pipeline-parallel-size $PP $extra --port 8000
