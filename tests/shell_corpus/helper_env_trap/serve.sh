#!/bin/bash
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ENV_OUT="$HERE/launcher.env"
# the helper turns the container's settings into launcher variables
python3 "$HERE/tgi_env.py" "$@" > "$ENV_OUT"
source "$ENV_OUT"
export HF_HUB_ENABLE_HF_TRANSFER=1
exec text-generation-launcher --port 8080 "$@"
