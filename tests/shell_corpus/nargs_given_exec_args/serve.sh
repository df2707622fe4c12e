#!/bin/bash
# Entrypoint for the serving image. Without arguments: the default model. With: the caller's command.
set -e
export HF_HOME=/data/hf
export VLLM_NO_USAGE_STATS=1

if [ $# -eq 0 ]; then
    set -- vllm serve /models/default --port 8000
elif [ "${1:0:1}" = "-" ]; then
    echo "options only: prepending the server" >&2
    set -- vllm serve /models/default "$@"
fi

echo "exec: $*"
exec "$@"
