import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--gpus", type=int, default=8)
n = parser.parse_args().gpus
print(f"TP={n}")
print(f"EP={max(1, n // 2)}")
print("export NCCL_ALGO=Ring")
