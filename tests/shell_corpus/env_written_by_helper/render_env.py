import sys

role = sys.argv[1] if len(sys.argv) > 1 else "decode"
port = 30000 if role == "prefill" else 30001
print(f"SERVE_PORT={port}")
print("SGLANG_DISAGGREGATION_QUEUE_SIZE=8")
print(f"MC_TCP_BIND_ADDRESS=10.20.0.{11 if role == 'prefill' else 12}")
