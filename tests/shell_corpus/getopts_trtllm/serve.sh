#!/bin/bash
ENGINE=/engines/qwen2.5-7b
PORT=8000
BACKEND=tensorrt
while getopts ":e:p:b:" o; do
  case "${o}" in
    e) ENGINE=${OPTARG} ;;
    p) PORT=${OPTARG} ;;
    b) BACKEND=${OPTARG} ;;
    :) echo "-${OPTARG} needs a value"; exit 1 ;;
  esac
done
shift $((OPTIND-1))

export TRTLLM_ENABLE_PDL=1
trtllm-serve "$ENGINE" --host 0.0.0.0 --port "$PORT" --backend ${BACKEND} "$@"
