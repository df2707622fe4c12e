#!/usr/bin/env bash
# Decode node: server output goes to the console and a log through tee; a
# warm-up client runs once the server is up; the job lives as long as both.
set -o pipefail

LOG_DIR=${LOG_DIR:-./logs}
mkdir -p "$LOG_DIR"
export SGLANG_HOST_IP=${SGLANG_HOST_IP:-$(hostname -I | awk '{print $1}')}
export GLOO_SOCKET_IFNAME=eth0

CUDA_VISIBLE_DEVICES=4,5,6,7 python3 -m sglang.launch_server \
    --model-path /models/Qwen3-30B-A3B \
    --disaggregation-mode decode --tp-size 4 \
    --host "$SGLANG_HOST_IP" --port 30001 \
    --disaggregation-transfer-backend mooncake \
    2>&1 | tee -a "$LOG_DIR/decode.log" &

for i in {1..120}; do
    curl -s -o /dev/null "http://$SGLANG_HOST_IP:30001/health" && break
    sleep 1
done

python3 warmup.py --url "http://$SGLANG_HOST_IP:30001" --requests 8
wait
