"""Tensor-parallel server entry point (run by torchrun on every rank)."""

import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--max-batch-size", type=int, default=16)

if __name__ == "__main__":
    args = parser.parse_args()
    print(f"would serve {args.model} with batch {args.max_batch_size}")
