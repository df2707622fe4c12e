"""The browser harness can fail: each check is shown catching the fault it exists for."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser import artifact_dir, check_page, launch_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless Chromium for the whole module: a launch costs about a second."""
    with launch_chromium() as browser:
        yield browser


@pytest.fixture
def sentinel_server() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback socket that records every connection made to it: (port, first bytes of each)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    seen.append(conn.recv(100))
                except OSError:
                    seen.append(b"")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def write_page(tmp_path: Path, body: str, head: str = "") -> Path:
    """A small HTML5 page in tmp_path."""
    path = tmp_path / "page.html"
    path.write_text(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>t</title>{head}'
        f"</head><body>{body}</body></html>",
        encoding="utf-8",
    )
    return path


def test_clean_page_passes_every_check(tmp_path: Path, chromium: Browser) -> None:
    page = write_page(
        tmp_path,
        "<h1>Incident report</h1><p>Culprit: <b>nginx.conf</b> changed</p>",
        head="<style>body { font-family: sans-serif; }</style>",
    )
    shot = tmp_path / "shots" / "clean.png"

    result = check_page(page, text="Culprit: nginx.conf", screenshot=shot, browser=chromium)

    assert result.requests == []
    assert result.console == []
    assert result.visible_above_fold
    assert result.text_box is not None and 0 <= result.text_box["y"] < 800
    assert result.screenshot == shot
    assert shot.read_bytes().startswith(PNG_SIGNATURE)
    # The PNG is the viewport the issue asks about: 1280x800 (IHDR width, height).
    assert shot.read_bytes()[16:24] == (1280).to_bytes(4, "big") + (800).to_bytes(4, "big")


def test_external_resources_are_recorded(tmp_path: Path, chromium: Browser) -> None:
    # A neighbouring file is a load too: the report must not depend on anything beside it.
    (tmp_path / "logo.png").write_bytes(PNG_SIGNATURE)
    page = write_page(
        tmp_path,
        '<p>Culprit</p><img src="http://example.invalid/x.png" alt="x"><img src="logo.png" alt="">',
        head=(
            '<link rel="stylesheet" href="https://cdn.example.invalid/report.css">'
            '<link rel="preconnect" href="https://fonts.example.invalid">'
        ),
    )

    result = check_page(page, text="Culprit", screenshot=tmp_path / "ext.png", browser=chromium)

    assert sorted(result.requests) == sorted(
        [
            "http://example.invalid/x.png",
            "https://cdn.example.invalid/report.css",
            "https://fonts.example.invalid/",
            (tmp_path / "logo.png").as_uri(),
        ]
    )
    # Each blocked load is also what a reader's console would show.
    assert sum("Failed to load resource" in line for line in result.console) == 3, result.console


def test_blocked_loads_never_reach_a_server(
    tmp_path: Path, chromium: Browser, sentinel_server: tuple[int, list[bytes]]
) -> None:
    port, seen = sentinel_server
    base = f"127.0.0.1:{port}"
    page = write_page(
        tmp_path,
        f'<p>Culprit</p><img src="http://{base}/x.png" alt="">'
        f"<script>fetch('http://{base}/api').catch(() => {{}});"
        f"new WebSocket('ws://{base}/live');</script>",
        head=f'<link rel="stylesheet" href="http://{base}/s.css">',
    )

    result = check_page(page, text="Culprit", screenshot=tmp_path / "s.png", browser=chromium)

    assert set(result.requests) >= {
        f"http://{base}/x.png",
        f"http://{base}/api",
        f"http://{base}/s.css",
        f"ws://{base}/live",
    }
    # The server is reachable (proved below), yet the browser never connected.
    assert seen == []
    with socket.create_connection(("127.0.0.1", port), timeout=2) as probe:
        probe.sendall(b"probe")
    for _ in range(50):
        if seen:
            break
        time.sleep(0.05)
    assert seen == [b"probe"]


def test_console_errors_and_page_errors_are_recorded(tmp_path: Path, chromium: Browser) -> None:
    page = write_page(
        tmp_path,
        "<p>Culprit</p>"
        '<script>console.error("boom"); console.warn("careful"); console.log("all good");</script>'
        "<script>undefinedFunction();</script>",
    )

    result = check_page(page, text="Culprit", screenshot=tmp_path / "c.png", browser=chromium)

    assert any("boom" in line for line in result.console), result.console
    assert any("careful" in line for line in result.console), result.console
    assert not any("all good" in line for line in result.console)
    assert any("undefinedFunction" in line for line in result.console), result.console
    assert result.requests == []


def test_text_below_the_fold_is_not_visible(tmp_path: Path, chromium: Browser) -> None:
    page = write_page(tmp_path, '<div style="height: 2000px"></div><p>Culprit: nginx.conf</p>')

    result = check_page(page, text="nginx.conf", screenshot=tmp_path / "f.png", browser=chromium)

    assert not result.visible_above_fold
    assert result.text_box is not None and result.text_box["y"] >= 2000


def test_text_straddling_the_fold_is_not_fully_visible(tmp_path: Path, chromium: Browser) -> None:
    page = write_page(
        tmp_path, '<div style="height: 790px"></div><p style="margin: 0">Culprit: nginx.conf</p>'
    )

    result = check_page(page, text="nginx.conf", screenshot=tmp_path / "s.png", browser=chromium)

    assert not result.visible_above_fold
    # A taller viewport brings the same line fully into view.
    taller = check_page(
        page,
        text="nginx.conf",
        screenshot=tmp_path / "t.png",
        viewport=(1280, 900),
        browser=chromium,
    )
    assert taller.visible_above_fold


def test_missing_text_and_selector_mismatch(tmp_path: Path, chromium: Browser) -> None:
    page = write_page(tmp_path, '<p class="note">Culprit: nginx.conf</p>')

    absent = check_page(page, text="sshd_config", screenshot=tmp_path / "a.png", browser=chromium)
    elsewhere = check_page(
        page,
        text="nginx.conf",
        selector=".culprit",
        screenshot=tmp_path / "w.png",
        browser=chromium,
    )

    assert not absent.visible_above_fold and absent.text_box is None
    assert not elsewhere.visible_above_fold and elsewhere.text_box is None


def test_dark_variant_uses_the_dark_color_scheme(tmp_path: Path, chromium: Browser) -> None:
    # The culprit line exists only in light mode, and the page turns black only in dark mode.
    page = write_page(
        tmp_path,
        '<p class="light-only">Culprit: nginx.conf</p>',
        head="<style>@media (prefers-color-scheme: dark) {"
        " html { background: #000 } .light-only { display: none } }</style>",
    )

    light = check_page(page, text="nginx.conf", screenshot=tmp_path / "l.png", browser=chromium)
    dark = check_page(
        page, text="nginx.conf", screenshot=tmp_path / "d.png", dark=True, browser=chromium
    )

    assert light.visible_above_fold
    assert not dark.visible_above_fold
    assert dark.screenshot.read_bytes() != light.screenshot.read_bytes()


def test_check_page_launches_its_own_browser_when_given_none(tmp_path: Path) -> None:
    page = write_page(tmp_path, "<p>Culprit: nginx.conf</p>")
    before = chromium_processes()

    result = check_page(page, text="nginx.conf", screenshot=tmp_path / "own.png")

    assert result.visible_above_fold and result.requests == [] and result.console == []
    for _ in range(50):  # the browser's helper processes exit just after it
        left = chromium_processes() - before
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"check_page left Chromium processes running: {left}"


def chromium_processes() -> set[tuple[int, str]]:
    """(pid, command line) of every Chromium process alive now."""
    out = subprocess.run(
        ["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True
    ).stdout
    procs = set()
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if "/usr/lib/chromium/" in args:
            procs.add((int(pid), args[:200]))
    return procs


def test_artifact_dir_is_at_the_repo_root_and_gitignored() -> None:
    path = artifact_dir()
    repo = Path(__file__).resolve().parent.parent

    assert path == repo / "test-artifacts" and path.is_dir()
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(path / "report.png")], cwd=repo, check=False
    )
    assert ignored.returncode == 0, "test-artifacts/ must be gitignored"
