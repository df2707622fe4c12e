import sys

gpus = 4
iface = "eth0"
if "--shell" in sys.argv:
    print(f"export NCCL_SOCKET_IFNAME={iface}")
    print(f"export GLOO_SOCKET_IFNAME={iface}")
    print(f"NUM_GPUS={gpus}")
