conda() {
    if [ "$1" = activate ]; then
        local name=${2:-base}
        export CONDA_PREFIX="${CONDA_EXE%/bin/conda}/envs/$name"
        export CONDA_DEFAULT_ENV="$name"
        export CONDA_SHLVL=1
        export PATH="$CONDA_PREFIX/bin:$PATH"
    else
        "$CONDA_EXE" "$@"
    fi
}
