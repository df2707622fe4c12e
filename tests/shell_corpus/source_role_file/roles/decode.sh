PORT=30001
export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600
ROLE_ARGS="--cuda-graph-max-bs 128 --max-running-requests 512"
export NCCL_IB_HCA=mlx5_2,mlx5_3
