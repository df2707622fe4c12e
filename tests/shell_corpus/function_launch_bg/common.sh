# Helpers shared by the service scripts in this folder.

export PYTHONUNBUFFERED=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

log() {
    printf '[%s] %s\n' "$(date -u +%FT%TZ)" "$*"
}
