"""The terminal report: colour only when asked, and never an escape sequence from the box."""

from __future__ import annotations

from drift.report import render_template

EVIL = "\x1b[2J\x1b[31mHACKED\x07"


def context(title: str) -> dict:
    snapshot = {"snapshot": 1, "local": "2026-12-02 12:00:00 UTC", "why": "given", "facts": 1}
    return {
        "command": "since",
        "host": "gpu-node-7",
        "baseline": {**snapshot, "source": "given", "unhealthy_at": None},
        "current": {**snapshot, "snapshot": 2, "why": "latest record"},
        "trust": {"summary": "1 after the baseline; no gaps; no collection errors", "warnings": []},
        "total_suspects": 1,
        "suspects": [
            {
                "rank": 1,
                "score": 0.9,
                "title": title,
                "status": "live",
                "label": "live in decode (pid 7)",
                "reasons": ["in a running process"],
                "signals": [],
                "changes": [],
                "restarts": [],
            }
        ],
        "timeline": [],
        "unchanged": {"count": 0, "by_kind": {}, "whole_subjects": [], "facts": []},
        "blind_spots": [],
        "explain": False,
        "digests": False,
    }


def test_plain_output_has_no_escape_sequences_even_from_values() -> None:
    out = render_template("since.txt.j2", context(f"export K={EVIL}"))
    assert "\x1b" not in out and "\x07" not in out
    assert "[31m" not in out and "[2J" not in out  # whole sequences go, no residue
    assert "HACKED" in out  # the text is kept, only the control characters go


def test_colour_styles_drift_s_own_text_but_not_values() -> None:
    out = render_template("since.txt.j2", context(f"export K={EVIL}"), color=True)
    assert "\x1b[1m" in out  # titles are bold
    assert "\x1b[2J" not in out and "\x1b[31mHACKED" not in out and "\x07" not in out
