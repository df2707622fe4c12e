# site environment modules (a shell function, like Lmod's)
module() {
    local sub=$1
    shift
    case "$sub" in
        purge) unset CUDA_HOME NCCL_HOME ;;
        load)
            for m in "$@"; do
                case "$m" in
                    cuda/*) export CUDA_HOME=/opt/cuda/${m#cuda/} ;;
                    nccl/*) export NCCL_HOME=/opt/nccl/${m#nccl/} ;;
                esac
            done
            ;;
    esac
}
