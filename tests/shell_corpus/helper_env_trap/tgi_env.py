import sys

shards = "2" if "--sharded" in sys.argv else "1"
print(f"export NUM_SHARD={shards}")
print("export MAX_BATCH_PREFILL_TOKENS=4096")
