#!/bin/bash
#SBATCH --job-name=sglang-qwen
#SBATCH --gres=gpu:4
#SBATCH --time=23:59:00
# Batch job: activate the sglang env from the project's miniforge, load the
# tokens from .env, then serve in the foreground until the job ends.

PROJ=$(cd "$(dirname "$0")" && pwd)
source "$PROJ/miniforge3/etc/profile.d/conda.sh"
conda activate sglang

set -a
. "$PROJ/.env"
set +a

PORT=30000
MODEL="Qwen/Qwen3-VL-8B-Instruct"
echo "Starting SGLang on $(hostname):$PORT (env $CONDA_DEFAULT_ENV)"

python3 -m sglang.launch_server \
  --model-path "$MODEL" \
  --host 0.0.0.0 \
  --port $PORT \
  --tp 4 \
  --mem-fraction-static 0.85
