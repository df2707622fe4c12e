#!/bin/bash
# Image entrypoint: every setting is an environment variable of the container.
args=(serve "${MODEL:?MODEL is required}")
[[ -n "${SERVED_NAME:-}" ]] && args+=(--served-model-name "$SERVED_NAME")
[[ -n "${MAX_MODEL_LEN:-}" ]] && args+=(--max-model-len "$MAX_MODEL_LEN")
[[ "${TRUST_REMOTE_CODE:-false}" == true ]] && args+=(--trust-remote-code)
[[ -n "${TP:-}" ]] && args+=(-tp "$TP")
args+=(--port "${PORT:-8000}")
export VLLM_NO_USAGE_STATS=1
exec vllm "${args[@]}"
