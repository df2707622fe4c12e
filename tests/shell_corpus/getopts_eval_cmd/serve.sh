#!/bin/bash
# serve.sh -m MODEL [-p PORT] [-t TP] [-q]
MODEL=""
PORT=8000
TP=1
QUIET=0

while getopts "m:p:t:q" opt; do
    case $opt in
        m) MODEL=$OPTARG ;;
        p) PORT=$OPTARG ;;
        t) TP=$OPTARG ;;
        q) QUIET=1 ;;
        *) echo "bad option" >&2; exit 2 ;;
    esac
done

[ -z "$MODEL" ] && { echo "-m is required" >&2; exit 2; }
export VLLM_CONFIGURE_LOGGING=$((1 - QUIET))
CMD="vllm serve $MODEL --port $PORT --tensor-parallel-size $TP"
[ "$QUIET" = 1 ] && CMD="$CMD --disable-log-requests"
eval $CMD
