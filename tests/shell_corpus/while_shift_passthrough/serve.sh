#!/bin/bash
MODEL=/models/Mixtral-8x22B-Instruct
TP=8
EXTRA_ARGS=""

while [[ $# -gt 0 ]]; do
    case $1 in
        --tp) TP=$2; shift ;;
        --tp=*) TP=${1#*=} ;;
        --model) MODEL=$2; shift ;;
        *) EXTRA_ARGS="$EXTRA_ARGS $1" ;;
    esac
    shift
done

export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
python3 -m vllm.entrypoints.openai.api_server --model $MODEL -tp $TP $EXTRA_ARGS
