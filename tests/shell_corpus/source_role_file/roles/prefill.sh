PORT=30000
export SGLANG_DISAGGREGATION_THREAD_POOL_SIZE=16
ROLE_ARGS="--chunked-prefill-size 32768 --max-prefill-tokens 65536"
