MODEL=/models/Kimi-K2-Instruct
export SGLANG_HOST_IP=10.3.0.7
export NCCL_IB_HCA=mlx5_0,mlx5_1
