"""The commented drift.toml that `drift init` writes when there is none."""

STARTER_CONFIG = """\
# drift.toml: what drift records every minute. Relative paths are taken from
# this file's folder. Reference: README.md, "Configuration".

# host = "gpu-node-7"          # default: this machine's hostname

# Where the history is, for every command that reads this file (cron, a
# systemd timer, `drift since` by hand): a path (relative to this folder) or
# postgresql://USER@HOST/DB. --db and $DRIFT_DB override it.
# db = "/var/lib/drift/drift.db"  # default: ~/.local/state/drift/drift.db
# secret_key_file = "/var/lib/drift/secret.key"   # default: beside the database

# A service: found by exactly one of unit (systemd), pidfile, or match (a
# regex on the command line). Its pid, start time, argv, each --flag and each
# variable of its live environment are recorded; `script` adds the serve
# script's contents and every variable it exports, with file and line.
# [[services]]
# name = "decode"
# unit = "sglang-decode.service"
# # pidfile = "/run/sglang/decode.pid"
# # match = "launch_server.*--disaggregation-mode decode"
# script = "/opt/serve/decode.sh"

# Files by glob (** crosses folders): sha256, size and mode of each. A walk
# stays on one filesystem and never enters /proc, /sys, /dev or /run unless
# the glob starts there; a file over max_size (or sparse) is recorded by its
# size, mtime and inode instead of being read; a set matching more than
# max_files files is not recorded (its files keep their last values).
# [[files]]
# name = "attention-kernels"
# paths = ["/opt/sglang/python/sglang/srt/layers/attention/**/*.py"]
# exclude = ["**/__pycache__/**", "*.log"]   # left out: neither hashed nor reported
# max_size = "1GiB"        # bytes, or a size in B, KiB, MiB, GiB or TiB
# one_file_system = true   # false: cross into other mounts too
# max_files = 200000

# A config file whose text is kept, so a change shows the keys that changed.
# [[files]]
# name = "router-config"
# paths = ["/etc/sglang/router.json"]
# content = true
# format = "json"          # json, yaml, toml or text

# A git checkout: HEAD, branch, dirty or not, untracked count.
# [[repos]]
# path = "/opt/sglang"

# A command whose output and exit code are recorded. Whatever it starts is
# killed once it is done, even what left its process group (setsid, daemons).
# [[commands]]
# name = "kernel"
# run = "uname -r"
# timeout = 10

# What "it works" means: run at every record; consecutive passing records
# form the stable window that `drift since` compares against by default.
# [[health]]
# name = "decode-answers"
# run = "curl -sf -m 20 http://127.0.0.1:30000/health_generate"
# timeout = 25

# A server's own view of its config: each leaf of the JSON document its URL
# answers with is recorded, so a default that moved with an engine upgrade
# shows even when the command line did not change. `ignore` leaves out parts
# that move every minute; `service` names the [[services]] entry it serves.
# [[endpoints]]
# name = "decode-info"
# url = "http://127.0.0.1:30000/get_server_info"   # SGLang; vLLM: http://127.0.0.1:8000/version
# timeout = 5
# # pointer = "/server_args"       # keep only this part (a JSON pointer)
# ignore = ["/internal_states"]
# service = "decode"

# A JIT or kernel cache, recorded as one summary (files, bytes, a digest over
# each file's name, size and mtime, newest and oldest mtime), never file by file.
# `~` is drift's own user's home: for a server running as another user, write
# its home. Defaults: Triton ~/.triton/cache ($TRITON_CACHE_DIR), FlashInfer
# ~/.cache/flashinfer/*/cached_ops ($FLASHINFER_WORKSPACE_BASE), DeepGEMM
# ~/.deep_gemm ($DG_JIT_CACHE_DIR).
# [[caches]]
# name = "triton"
# paths = ["/home/sglang/.triton/cache"]
# hash = "stat"            # or "content": read every file at every record

# Secrets are stored as keyed hashes. Add names to always redact, or names
# never to redact by name (values in known token formats are redacted anyway).
# [secrets]
# redact = ["MY_INTERNAL_*"]
# allow = ["TOKENIZERS_PARALLELISM"]

# The NVIDIA driver and each GPU's settings (power limit, clocks, ECC, MIG),
# read by default whenever nvidia-smi is on PATH (or NVML is installed). A tool
# that fails, or goes missing while the driver lists GPUs, is a blind spot, never
# GPUs gone; true makes a missing tool a blind spot even without the driver.
# [gpu]
# enabled = true
"""

# The commented `db` line of STARTER_CONFIG, replaced when init is given a database.
_DB_LINE = '# db = "/var/lib/drift/drift.db"  # default: ~/.local/state/drift/drift.db\n'


def starter_config(db: str | None) -> str:
    """STARTER_CONFIG, naming `db` (the database `drift init` was given, password dropped)
    so that every later command reading this file uses it, not a second history."""
    if db is None:
        return STARTER_CONFIG
    import json

    # A JSON string is a TOML basic string: quotes, backslashes, control characters escaped.
    return STARTER_CONFIG.replace(_DB_LINE, f"db = {json.dumps(db, ensure_ascii=False)}\n", 1)
