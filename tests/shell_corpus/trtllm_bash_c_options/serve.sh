#!/bin/bash
# Runs inside the job step; ADDITIONAL_OPTIONS may add server flags.
LOCAL_MODEL=${LOCAL_MODEL:-/models/Llama-3.1-8B-Instruct}
TP=${TP:-1}
LOG_LEVEL=WARNING

bash -c "
    set -e
    export TLLM_LOG_LEVEL=$LOG_LEVEL
    exec trtllm-serve $LOCAL_MODEL --tp_size $TP --host 0.0.0.0 --port 8000 ${ADDITIONAL_OPTIONS:-}
"
