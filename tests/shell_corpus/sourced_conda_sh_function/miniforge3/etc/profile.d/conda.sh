# Minimal stand-in for conda's shell hook: `conda activate NAME` only.
_CONDA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CONDA_EXE="$_CONDA_ROOT/bin/conda"

conda() {
    if [ "$1" = activate ] && [ -n "$2" ]; then
        export CONDA_PREFIX="$_CONDA_ROOT/envs/$2"
        export CONDA_DEFAULT_ENV="$2"
        export CONDA_SHLVL=1
        export PATH="$CONDA_PREFIX/bin:$PATH"
    else
        echo "conda: only 'activate' is supported here" >&2
        return 1
    fi
}
