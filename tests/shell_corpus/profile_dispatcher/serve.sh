#!/bin/bash
# Generic launcher used by the job templates: loads a cluster profile, then
# runs the given command in its place.
#   serve.sh [--profile NAME] COMMAND [ARGS...]
set -euo pipefail

PROFILE=default
if [[ "${1:-}" == --profile ]]; then
    PROFILE=$2
    shift 2
fi

PROFILE_DIR=$(dirname "$0")/profiles
# shellcheck source=/dev/null
source "$PROFILE_DIR/$PROFILE.sh"

export JOB_PROFILE=$PROFILE
[[ "$PROFILE" == ib ]] && export NCCL_NET=IB

echo "profile $PROFILE: $*"
exec "$@"
