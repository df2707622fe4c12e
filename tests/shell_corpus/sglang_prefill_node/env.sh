# Shared environment for the SGLang PD nodes (sourced by serve.sh).
export CUDA_DEVICE_MAX_CONNECTIONS=1
export NCCL_DEBUG=WARN
export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600
export TORCH_CUDA_ARCH_LIST="9.0"
