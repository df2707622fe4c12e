#!/bin/bash
LOG=server_$(date +%Y%m%d).log
EXTRA=""
[ "${SPEC:-}" = eagle ] && EXTRA="--speculative-algorithm EAGLE --speculative-num-steps 3"
export SGLANG_ENABLE_SPEC_V2=1
CMD="python3 -m sglang.launch_server --model-path /models/Llama-3.1-8B-Instruct --port 30000 $EXTRA"
$CMD 2>&1 | tee "$LOG"
