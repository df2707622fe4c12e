#!/bin/bash
set -e
ROLE=${ROLE:-decode}
# the node's settings are rendered from the cluster inventory at start
python3 render_env.py "$ROLE" > ./node.env
set -a
. ./node.env
set +a
exec python3 -m sglang.launch_server --model-path /models/DeepSeek-V3 --disaggregation-mode "$ROLE" \
    --tp 8 --port "$SERVE_PORT"
