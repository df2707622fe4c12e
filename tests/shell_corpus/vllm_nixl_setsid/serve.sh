#!/bin/bash
# vLLM prefill instance for disaggregated serving over NIXL (KV cache sent
# to the decode instances). Detached with setsid so a restart of the agent
# does not take the server down; the script stays as its supervisor.
set -euo pipefail

DP_RANK=${DP_RANK:-0}
MODEL=${MODEL:-/models/Llama-3.3-70B-Instruct}
KV_CONFIG='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

export UCX_TLS=cuda_ipc,cuda_copy,tcp
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-mlx5_0:1}
export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname)
export VLLM_NIXL_SIDE_CHANNEL_PORT=$((5600 + DP_RANK))
export VLLM_NIXL_SIDE_CHANNEL_PORT

setsid vllm serve "$MODEL" \
    --port $((8100 + DP_RANK)) \
    --tensor-parallel-size 4 \
    --enforce-eager \
    --kv-transfer-config "$KV_CONFIG" &

echo "prefill rank ${DP_RANK} started"
wait
