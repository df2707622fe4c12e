"""The incident's HTML report in a real headless Chromium: self-contained, and the culprit first.

Screenshots are kept in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser import artifact_dir, check_page, launch_chromium
from conftest import run_drift

from drift.demo import CULPRIT, DEMO_TOKEN
from drift.facts import Fact
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter
from drift.timespec import iso

if TYPE_CHECKING:
    from playwright.sync_api import Page

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the browser tests skip themselves
    PlaywrightTimeout = TimeoutError  # type: ignore[misc,assignment]

# What the drawn timeline looks like in the page: boxes in viewport pixels.
GLANCE_PROBE = """() => {
    const svg = document.querySelector("svg.glance");
    if (!svg) return null;
    const box = e => {
        const r = e.getBoundingClientRect();
        return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
    };
    const all = (sel, root = svg) => [...root.querySelectorAll(sel)];
    return {
        svg: box(svg),
        markers: all("a.g-marker").map(a => ({
            href: a.getAttribute("href"),
            card: !!document.querySelector(`li.suspect${a.getAttribute("href")}`),
            title: a.querySelector("title").textContent,
            box: box(a.querySelector("circle")),
        })),
        cards: document.querySelectorAll("li.suspect").length,
        failing: all("rect.g-failing").map(box),
        unhealthy: all("g.g-unhealthy line").map(box),
        lanes: all("g.g-lane").map(g => ({
            name: g.dataset.service,
            starts: all("line.g-start", g).map(box),
        })),
        ticks: all("text.g-tick-label, text.g-day").map(t => ({text: t.textContent, box: box(t)})),
        lines: all("g.g-line text").map(t => ({text: t.textContent, box: box(t)})),
        folds: all("g.g-fold").length,
        gaps: all("rect.g-gap").map(box),
    };
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with launch_chromium() as b:
        yield b


def test_incident_report_loads_nothing_and_shows_the_culprit_above_the_fold(
    sandbox, tmp_path: Path, browser
) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    # decode answers while this file is there: the incident's health check.
    answers = sandbox.root / "decode-answers"
    answers.touch()
    with sandbox.config_path.open("a") as config:
        config.write(f'\n[[health]]\nname = "decode-answers"\nrun = "test -e {answers}"\n')
    run_drift(["record", *cfg], tmp_path)
    run_drift(["mark", "stable", "--note", "decode answers", *cfg], tmp_path)
    sandbox.add_culprit()
    sandbox.touch_kernel()
    sandbox.restart_all()
    answers.unlink()
    run_drift(["record", *cfg], tmp_path)
    report = tmp_path / "postmortem.html"
    out = run_drift(["report", "-o", str(report), *cfg], tmp_path).stdout
    assert out.startswith(f"wrote {report} (html, ")
    html = report.read_text()
    assert DEMO_TOKEN not in html
    assert f"drift report -o {report}" in html  # the command that regenerates it

    title = CULPRIT.removeprefix("export ")  # "SGLANG_SM120_MMA_TARGET_CTAS=512"
    for dark in (False, True):
        name = "incident-report-dark.png" if dark else "incident-report.png"
        check = check_page(
            report,
            text=title,
            screenshot=artifact_dir() / name,
            dark=dark,
            browser=browser,
            probe=GLANCE_PROBE,
        )
        assert check.requests == []
        assert check.console == []
        assert check.visible_above_fold, check.text_box
        assert check.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        glance = check.probed
        assert glance is not None, "no drawn timeline"
        assert_drawing_above_the_fold(glance)
        # One marker per suspect, each linked to its card, its status in its tooltip.
        assert len(glance["markers"]) == glance["cards"] >= 1
        assert all(m["card"] for m in glance["markers"])
        assert any(title in m["title"] and "LIVE" in m["title"] for m in glance["markers"])
        # The health band turns red where the first failing check is drawn.
        [unhealthy] = glance["unhealthy"]
        [failing] = glance["failing"]
        assert abs(failing["left"] - unhealthy["left"]) < 2.5, (failing, unhealthy)
        # Each service's lane has the tick of its restart.
        assert sorted(lane["name"] for lane in glance["lanes"]) == ["decode", "prefill", "router"]
        assert all(len(lane["starts"]) == 1 for lane in glance["lanes"]), glance["lanes"]


def assert_drawing_above_the_fold(glance: dict) -> None:
    """The drawing is wholly in the first 1280x800 viewport, and its labels do not overlap."""
    svg = glance["svg"]
    assert svg["top"] >= 0 and svg["bottom"] <= 800 and svg["right"] <= 1280, svg
    labels = sorted(glance["ticks"], key=lambda t: (t["box"]["top"], t["box"]["left"]))
    for a, b in zip(labels, labels[1:], strict=False):
        if abs(a["box"]["top"] - b["box"]["top"]) < 1:
            assert a["box"]["right"] <= b["box"]["left"], (a, b)
    for t in labels + glance["lines"]:
        assert svg["left"] <= t["box"]["left"] and t["box"]["right"] <= svg["right"] + 0.5, t


MINUTE = 60_000_000
DAY = 24 * 60 * MINUTE
WEEK_START = 1_796_601_600_000_000  # Monday 2026-12-07 00:00 UTC


def week_of_history(db: Path) -> None:
    """A week recorded every 5 minutes on a fake clock: an export change that decode picks up
    on Tuesday morning and fails for an hour; half a day with no record on Wednesday night;
    a kernel file changed and router restarted three times on Friday, failing 35 minutes."""
    export = {"file": "/srv/serve/decode.sh", "line": 8, "text": "export CTAS=512"}
    step = 5 * MINUTE
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        at = WEEK_START
        while at <= WEEK_START + 7 * DAY:
            day, minute = divmod(at - WEEK_START, DAY)
            minute //= MINUTE
            if day == 2 and minute >= 20 * 60 or day == 3 and minute < 8 * 60:
                at += step  # the recording gap
                continue
            first = day > 1 or (day == 1 and minute >= 9 * 60 + 50)
            decode_start = WEEK_START + DAY + (9 * 60 + 55) * MINUTE
            restarted = at >= decode_start
            router_starts = [WEEK_START + 4 * DAY + (14 * 60 + m) * MINUTE for m in (0, 10, 20)]
            router_start = max([WEEK_START - DAY, *(t for t in router_starts if t <= at)])
            failing = (day == 1 and 10 * 60 <= minute < 11 * 60) or (
                day == 4 and 14 * 60 + 5 <= minute < 14 * 60 + 40
            )
            facts = [
                Fact(
                    "script:/srv/serve/decode.sh", "export:CTAS", "512" if first else "256", export
                ),
                Fact("service:decode", "running", "true"),
                Fact("service:decode", "pid", "200" if restarted else "100"),
                Fact(
                    "service:decode",
                    "started_at",
                    iso(decode_start if restarted else WEEK_START - DAY),
                ),
                Fact("service:router", "running", "true"),
                Fact(
                    "service:router", "pid", str(300 + len([t for t in router_starts if t <= at]))
                ),
                Fact("service:router", "started_at", iso(router_start)),
                Fact(
                    "file:/srv/kernels/mla.py",
                    "sha256",
                    ("b" if at >= router_starts[0] - 10 * MINUTE else "a") * 64,
                ),
                Fact("health:answers", "ok", "false" if failing else "true"),
            ]
            writer.write_snapshot("week-host", at, facts, [], {})
            at += step
        writer.add_mark("week-host", "stable", WEEK_START + 60 * MINUTE, "all good <script>")


def test_a_week_with_two_incidents_and_a_gap_draws_legibly(
    tmp_path: Path, browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    db = tmp_path / "week.db"
    week_of_history(db)
    report = tmp_path / "week.html"
    args = ["--db", str(db), "--host", "week-host", "--stable", "#1", "-o", str(report)]
    run_drift(["report", *args], tmp_path)
    check = check_page(
        report,
        text="CTAS",
        screenshot=artifact_dir() / "week-report.png",
        browser=browser,
        probe=GLANCE_PROBE,
    )
    assert check.requests == [] and check.console == []
    glance = check.probed
    assert glance is not None
    assert_drawing_above_the_fold(glance)
    # Two incidents: two red stretches, the first where the first failing check is.
    assert len(glance["failing"]) == 2
    assert abs(glance["failing"][0]["left"] - glance["unhealthy"][0]["left"]) < 2.5
    # Wide enough to see: each incident is not a sliver.
    assert all(r["right"] - r["left"] >= 8 for r in glance["failing"]), glance["failing"]
    assert len(glance["gaps"]) == 1 and glance["folds"] >= 1
    assert len(glance["markers"]) == glance["cards"] == 2
    assert all(m["card"] for m in glance["markers"])
    lanes = {lane["name"]: lane["starts"] for lane in glance["lanes"]}
    assert len(lanes["decode"]) == 1 and len(lanes["router"]) == 3
    # Days are named under the axis, on the reader's clock (Berlin).
    texts = [t["text"] for t in glance["ticks"]]
    assert any(t.startswith(("Tue", "Wed", "Thu", "Fri")) for t in texts), texts
    html = report.read_text()
    assert "times in CET" in html
    assert "all good &lt;script&gt;" in html and "<script" not in html


# Every suspect marker's box in viewport pixels, what is hit at its centre, and the
# "+N more" link: whether a reader can see and click each one.
MARKERS_PROBE = """() => {
    const svg = document.querySelector("svg.glance");
    const box = e => {
        const r = e.getBoundingClientRect();
        return {left: r.left, top: r.top, right: r.right, bottom: r.bottom,
                shown: e.checkVisibility({opacityProperty: true, visibilityProperty: true})};
    };
    const hit = b => {
        const e = document.elementFromPoint((b.left + b.right) / 2, (b.top + b.bottom) / 2);
        const a = e && e.closest("a");
        return a ? a.getAttribute("href") : null;
    };
    const more = svg.querySelector("a.g-more");
    return {
        svg: box(svg),
        markers: [...svg.querySelectorAll("a.g-marker")].map(a => {
            const b = box(a);
            return {href: a.getAttribute("href"), text: a.querySelector("text").textContent,
                    box: b, hit: hit(b)};
        }),
        cards: [...document.querySelectorAll("li.suspect")].map(li => li.id),
        more: more && {text: more.querySelector("text").textContent,
                       href: more.getAttribute("href"), box: box(more), hit: hit(box(more))},
    };
}"""


def click_first_marker(page: Page) -> dict:
    """Click #1's marker where it is drawn, as a reader would; where that took them."""
    box = page.locator('a.g-marker[href="#suspect-1"]').bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    with contextlib.suppress(PlaywrightTimeout):  # a covered marker goes elsewhere, or nowhere
        page.wait_for_function("() => location.hash === '#suspect-1'", timeout=3000)
    return page.evaluate(
        """() => ({hash: location.hash,
                   card: document.querySelector("#suspect-1").getBoundingClientRect().top})"""
    )


def overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


def assert_every_marker_visible_apart_and_first_clickable(
    report: Path, browser, name: str, *, all_drawn: bool
) -> None:
    """At 1280 and 800 px: each marker shown whole, none over another, #1 hit where it is drawn
    and taken to its card when clicked; the ten most likely always drawn, the rest counted."""
    for width in (1280, 800):
        check = check_page(
            report,
            text="Suspects",
            screenshot=artifact_dir() / f"{name}-{width}.png",
            viewport=(width, 900),
            browser=browser,
            probe=MARKERS_PROBE,
            act=click_first_marker,
        )
        assert check.requests == [] and check.console == []
        got = check.probed
        markers = got["markers"]
        cards = got["cards"]
        drawn = sorted(int(m["href"].removeprefix("#suspect-")) for m in markers)
        assert drawn == sorted(set(drawn)), drawn  # one marker per suspect
        assert all(f"suspect-{rank}" in cards for rank in drawn)
        assert set(range(1, min(10, len(cards)) + 1)) <= set(drawn), (drawn, len(cards))
        for m in markers:
            b = m["box"]
            assert b["shown"] and b["right"] - b["left"] > 4 and b["bottom"] - b["top"] > 4, m
            assert 0 <= b["left"] and b["right"] <= width and 0 <= b["top"] < 900, (width, m)
            # Nothing drawn over it: its own link is what a click at its centre hits.
            assert m["hit"] == m["href"], (width, m)
        for i, a in enumerate(markers):
            for b in markers[i + 1 :]:
                assert not overlap(a["box"], b["box"]), (width, a, b)
        assert check.acted["hash"] == "#suspect-1"
        assert abs(check.acted["card"]) < 2, check.acted  # the card scrolled to the top
        if all_drawn:
            assert len(drawn) == len(cards), (drawn, cards)
            assert got["more"] is None
        else:
            more = got["more"]
            assert more is not None and more["href"] == "#suspects", more
            assert more["text"] == f"+{len(cards) - len(drawn)} more", (more, len(cards))
            assert more["box"]["shown"] and more["hit"] == "#suspects", more
            assert 0 <= more["box"]["left"] and more["box"]["right"] <= width, more
            assert not any(overlap(more["box"], m["box"]) for m in markers), more


def add_exports(box, service: str, names: list[str]) -> None:
    """Add an export line per name to a service's serve script, before its exec line."""
    script = box.script(service)
    lines = script.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("echo $$"))
    lines[at:at] = [f"export {n}={len(n)}" for n in names]
    script.write_text("\n".join(lines) + "\n")


def recorded_stable(sandbox, tmp_path: Path) -> list[str]:
    """A first record marked stable; the options that name the sandbox's config and history."""
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["mark", "stable", *cfg], tmp_path)
    return cfg


def test_many_changes_in_one_record_draw_every_marker_apart_with_the_first_on_top(
    sandbox, tmp_path: Path, browser
) -> None:
    cfg = recorded_stable(sandbox, tmp_path)
    # One change of plan: a dozen exports on decode, three on prefill, a kernel edited.
    sandbox.add_culprit()
    add_exports(sandbox, "decode", [f"DECODE_KNOB_{i}" for i in range(12)])
    add_exports(sandbox, "prefill", [f"PREFILL_KNOB_{i}" for i in range(3)])
    sandbox.kernel.write_text(sandbox.kernel.read_text() + "\nBLOCK_N = 128\n")
    sandbox.restart_all()
    run_drift(["record", *cfg], tmp_path)
    report = tmp_path / "many.html"
    run_drift(["report", "-o", str(report), *cfg], tmp_path)
    assert report.read_text().count('class="suspect') > 10
    assert_every_marker_visible_apart_and_first_clickable(
        report, browser, "many-in-one-record", all_drawn=False
    )


def test_changes_spread_over_records_draw_every_marker_apart(
    sandbox, tmp_path: Path, browser
) -> None:
    cfg = recorded_stable(sandbox, tmp_path)
    # Three records a second apart, each with a few changes, then a quiet one.
    for step in range(3):
        add_exports(sandbox, "decode", [f"STEP_{step}_KNOB_{i}" for i in range(4)])
        add_exports(sandbox, "router", [f"ROUTER_{step}"])
        sandbox.restart_all()
        run_drift(["record", *cfg], tmp_path)
        time.sleep(1)
    run_drift(["record", *cfg], tmp_path)
    report = tmp_path / "spread.html"
    run_drift(["report", "-o", str(report), *cfg], tmp_path)
    assert_every_marker_visible_apart_and_first_clickable(
        report, browser, "spread-over-records", all_drawn=True
    )
