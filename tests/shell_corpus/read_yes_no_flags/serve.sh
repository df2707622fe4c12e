#!/bin/bash
FLAGS=""
read -r -p "Enable prefix caching? [Y/n] " answer
case "${answer:-y}" in
    [Yy]*) FLAGS="$FLAGS --enable-prefix-caching" ;;
    *) FLAGS="$FLAGS --no-enable-prefix-caching" ;;
esac
read -r -p "Quantization (none/fp8): " QUANT
[ "${QUANT:-none}" != none ] && FLAGS="$FLAGS --quantization $QUANT"
export VLLM_USE_V1=1
vllm serve /models/Llama-3.2-11B-Vision-Instruct --port 8000 $FLAGS
