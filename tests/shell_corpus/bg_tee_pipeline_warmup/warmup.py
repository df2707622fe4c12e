"""Send a few requests so that the first real ones do not pay for compilation."""

import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--url", required=True)
parser.add_argument("--requests", type=int, default=4)
args = parser.parse_args()
print(f"warm-up: {args.requests} requests to {args.url}")
