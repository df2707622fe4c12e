# NCCL/IB settings for the RoCE fabric
export NCCL_IB_GID_INDEX=3
export NCCL_IB_TC=106
export NCCL_IB_SL=3
if [[ -z "${NCCL_IB_HCA:-}" ]]; then
    export NCCL_IB_HCA=mlx5_bond_0
fi
