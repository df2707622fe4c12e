# InfiniBand hosts (8x CX-7)
export NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7
export NCCL_IB_GID_INDEX=3
export UCX_NET_DEVICES=mlx5_0:1
