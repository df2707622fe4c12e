"""Write the generation server's LLM API options (cache transceiver for disaggregation)."""

import sys

config, tp = sys.argv[1], int(sys.argv[2])
with open(config, "w") as out:
    out.write(
        "disable_overlap_scheduler: true\n"
        "cache_transceiver_config:\n"
        "  backend: UCX\n"
        f"  max_tokens_in_buffer: {4096 * tp}\n"
    )
