# Ethernet-only hosts
export NCCL_IB_DISABLE=1
export NCCL_SOCKET_IFNAME=eth0
