#!/bin/bash
# Benchmark node: the server gets a fixed time budget.
BUDGET=${BUDGET:-7200}
SERVER="python3 -m sglang.launch_server --model-path /models/Mistral-Nemo-Instruct-2407 --port 30000"
SERVER="$SERVER --max-running-requests 128"
export SGLANG_IS_IN_CI=false
timeout --signal=INT "$BUDGET" $SERVER
echo "server exited with $?"
