# Defaults shared by prefill and decode.
MODEL_PATH=${MODEL_PATH:-/models/Kimi-K2-Instruct}
TP=${TP:-16}
export SGLANG_USE_MODELSCOPE=false
export PYTHONUNBUFFERED=1
