#!/bin/bash
# Container entrypoint: set up the runtime environment, then run whatever
# command the pod spec gives (CMD / args), e.g.
#   entrypoint.sh python3 -m sglang.launch_server --model-path /models/x
set -euo pipefail

cd "$(dirname "$0")"

if [[ -f runtime.env ]]; then
    set -a
    source runtime.env
    set +a
fi

export SGLANG_TORCH_PROFILER_DIR=${PROFILE_DIR:-/tmp/profiles}
export OMP_NUM_THREADS=$(nproc)

if [[ $# -eq 0 ]]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 64
fi

echo "exec: $*"
exec "$@"
