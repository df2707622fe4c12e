#!/usr/bin/env bash
# trtllm-serve on whichever site this checkout is deployed to: lib/common.sh
# loads lib/site/$SITE.sh, which may override the common settings.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

if [[ "$MODEL" == /* && ! -d "$MODEL" ]]; then
    log "warning: $MODEL is not on this node; trtllm-serve will try the hub"
fi

ENGINE_ARGS=(--backend pytorch --tp_size "$TP" --max_batch_size "$MAX_BATCH")
log "site=${SITE} tp=${TP} batch=${MAX_BATCH}"

exec trtllm-serve "$MODEL" --host 0.0.0.0 --port "$PORT" \
    "${ENGINE_ARGS[@]}" $SITE_ARGS
