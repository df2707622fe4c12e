"""Restart storms on a real systemd while `drift record` runs: the long run of the stress test.

    .venv/bin/python benchmarks/stress_systemd.py [--restarts 1000] [--seconds 600] [--json FILE]

The storm of tests/test_systemd_stress.py (tests/systemd_stress.py: a crash-looping
hardened unit and a unit the host restarts, `drift record` back to back, drift's
finder in-process with a spy on systemd's child), with as many restarts as asked,
then the test's own checks of the history. It prints how many records and
collections there were, what each recorded, how often the finder met systemd's
child, and how many records ended in a blind spot. Needs root, the container
rootfs (`.ci/systemd-container setup`) and the test extras. Exit 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main(argv: list[str] | None = None) -> int:
    """Run one storm, check the history it left, print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--restarts", type=int, default=1000, help="restarts of each unit")
    parser.add_argument("--seconds", type=float, default=600.0, help="stop the storm after this")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    args = parser.parse_args(argv)
    from systemd_container import SystemdContainer, systemd_available
    from systemd_stress import run_stress
    from test_systemd_stress import check_history

    reason = systemd_available()
    if reason is not None:
        print(f"stress: {reason}", file=sys.stderr)
        return 2
    failed = ""
    with tempfile.TemporaryDirectory(prefix="drift-stress-") as tmp, SystemdContainer() as box:
        run = run_stress(box, Path(tmp), restarts=args.restarts, seconds=args.seconds)
        print(run.summary())
        try:
            check_history(run)
        except AssertionError as exc:
            failed = str(exc) or repr(exc)
        figures = run.figures()
    figures["failed"] = failed or None
    print(json.dumps(figures))
    if args.json:
        args.json.write_text(json.dumps(figures) + "\n", encoding="utf-8")
    if failed:
        print(f"stress: FAILED: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
