"""Render the chat template and report the model's context length (run before the server)."""

import argparse
import pathlib

TEMPLATE = """{% for message in messages %}<start_of_turn>{{ message['role'] }}
{{ message['content'] }}<end_of_turn>
{% endfor %}<start_of_turn>model
"""

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()

out = pathlib.Path(args.out)
out.mkdir(parents=True, exist_ok=True)
(out / "chat.jinja").write_text(TEMPLATE)
print(131072 if "gemma-3" in args.model else 8192)
