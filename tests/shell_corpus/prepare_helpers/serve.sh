#!/bin/bash
# SGLang server for the chat model: checks the environment, renders the chat
# template and the tokenizer cache, then hands over to the server.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$SCRIPT_DIR"
source venv/bin/activate

MODEL_PATH=${MODEL_PATH:-/models/gemma-3-27b-it}
export SGLANG_TEMPLATE_DIR="${SCRIPT_DIR}/templates"

python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
python3 -c 'import sglang; print("sglang", sglang.__version__)'
pip install --quiet --no-deps sglang-router==0.1.4
python3 -m pip check || true

# Writes templates/chat.jinja and prints the context length the model supports.
CONTEXT_LEN=$(python3 prepare.py --model "$MODEL_PATH" --out "$SGLANG_TEMPLATE_DIR")
export SGLANG_CONTEXT_LEN=$CONTEXT_LEN

exec python3 -m sglang.launch_server \
    --model-path "$MODEL_PATH" \
    --chat-template "$SGLANG_TEMPLATE_DIR/chat.jinja" \
    --context-length "$CONTEXT_LEN" \
    --tp 2 \
    --port 30000
