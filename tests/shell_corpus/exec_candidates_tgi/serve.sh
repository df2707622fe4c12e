#!/bin/bash
# Entrypoint of the TGI image: a shell, a launcher with options, or any command.
if [[ "$1" == "bash" || "$1" == "sh" ]]; then
    exec /bin/bash
fi

if [[ -z "${HF_TOKEN:-}" && -f /run/secrets/hf_token ]]; then
    export HF_TOKEN=$(cat /run/secrets/hf_token)
fi
export HUGGINGFACE_HUB_CACHE=/data

if [[ "$1" == --* ]]; then
    exec text-generation-launcher "$@"
fi
exec "$@"
