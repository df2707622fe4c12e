#!/bin/bash
# Text Generation Inference with settings from serving.conf (KEY=VALUE lines)
cd "$(dirname "$0")"

while IFS='=' read -r key value; do
    [[ -z "$key" || "$key" == \#* ]] && continue
    eval "export $key=\"$value\""
done < serving.conf

export PORT=${PORT:-8080}

exec text-generation-launcher \
    --model-id "$MODEL_ID" \
    --port "$PORT" \
    --max-concurrent-requests "$MAX_CONCURRENT" \
    --sharded true --num-shard "$SHARDS"
