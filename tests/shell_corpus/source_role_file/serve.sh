#!/bin/bash
# settings per role live in roles/<role>.sh
ROLE=${1:-prefill}
HERE=$(dirname "$(readlink -f "$0")")
source "$HERE/roles/common.sh"
source "$HERE/roles/$ROLE.sh"
exec python3 -m sglang.launch_server --model-path "$MODEL" --port "$PORT" \
    --disaggregation-mode "$ROLE" $ROLE_ARGS
