"""Load an HTML page in Debian's headless Chromium and check it as a reader would.

`check_page` records every load the page attempts beyond itself (all blocked, so
nothing reaches the network), console errors and warnings, a screenshot, and
whether a given text is fully visible in the first viewport.

Playwright's wheel brings its own driver but no browser: we never run
`playwright install` (it downloads a browser build); we launch Debian's
/usr/bin/chromium, which .ci/chromium installs. Locally a missing chromium or
Playwright skips the test; in CI (`CI=true`) it fails.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import (
        Browser,
        ConsoleMessage,
        Page,
        Playwright,
        Route,
        WebSocketRoute,
    )

CHROMIUM = "/usr/bin/chromium"

# Playwright already passes most quiet-browser switches (its chromiumSwitches); these
# repeat the ones the issue names so the launch does not depend on Playwright's defaults.
# No --disable-features here: a second one would replace Playwright's list.
CHROMIUM_ARGS = [
    "--no-sandbox",  # tests run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]

# Resource hints make a normal browser open connections without any request event,
# so routing cannot see them: read them from the DOM instead.
_HINTS_JS = """() => [...document.querySelectorAll(
    'link[rel~="preconnect" i], link[rel~="dns-prefetch" i]')].map(e => e.href)"""

# Fonts loaded and two frames painted, so boxes and the screenshot show the final layout.
_SETTLE_JS = """() => document.fonts.ready.then(() => new Promise(
    done => requestAnimationFrame(() => requestAnimationFrame(done))))"""

# The innermost elements matching the selector whose rendered text contains the
# target (whitespace collapsed), with document-relative boxes.
_FIND_TEXT_JS = """([selector, text]) => {
    const norm = s => (s || "").replace(/\\s+/g, " ").trim();
    const want = norm(text);
    const hits = [...document.querySelectorAll(selector)]
        .filter(e => norm(e.innerText ?? e.textContent).includes(want));
    return hits
        .filter(e => !hits.some(o => o !== e && e.contains(o)))
        .map(e => {
            const r = e.getBoundingClientRect();
            const shown = e.checkVisibility({opacityProperty: true, visibilityProperty: true})
                && r.width > 0 && r.height > 0;
            return {x: r.left + scrollX, y: r.top + scrollY, width: r.width,
                    height: r.height, shown};
        });
}"""

# Sub-pixel layout can put an edge a fraction past the viewport.
_EDGE_SLACK = 0.5


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def chromium_available() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed (pip install playwright)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (run .ci/chromium, or apt-get install chromium)"
    return None


def require_chromium() -> None:
    """Skip the calling test when the browser is missing; fail instead in CI, which installs it."""
    reason = chromium_available()
    if reason is None:
        return
    if _in_ci():
        pytest.fail(f"{reason}: .ci/run should have installed it")
    pytest.skip(reason)


def artifact_dir() -> Path:
    """`<repo>/test-artifacts`, created: where screenshots are kept after the run (gitignored)."""
    path = Path(__file__).resolve().parent.parent / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


# Playwright's sync API allows one driver per thread, so nested launches (a module's
# shared browser, then check_page starting its own) share it; the last one out stops it.
_driver: Playwright | None = None
_driver_users = 0


@contextmanager
def _playwright() -> Iterator[Playwright]:
    global _driver, _driver_users
    if _driver is None:
        from playwright.sync_api import sync_playwright

        _driver = sync_playwright().start()
    _driver_users += 1
    try:
        yield _driver
    finally:
        _driver_users -= 1
        if _driver_users == 0:
            _driver.stop()
            _driver = None


@contextmanager
def launch_chromium() -> Iterator[Browser]:
    """Start Debian's headless Chromium under Playwright; close it (and the driver) on exit."""
    require_chromium()
    with _playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class PageCheck:
    """What a reader's browser did with a page."""

    requests: list[str]  # every URL the page tried to load beyond itself (all blocked)
    console: list[str]  # console errors and warnings, then uncaught page errors
    screenshot: Path  # PNG of the first viewport (the whole page with full_page=True)
    visible_above_fold: bool  # the target text is fully inside the first viewport
    text_box: dict | None  # its box in page coordinates (x, y, width, height), None if absent
    probed: Any = None  # what the `probe` script returned, evaluated once the page settled
    acted: Any = None  # what `act` returned, run after the probe and the screenshot


def check_page(
    html_path: Path,
    *,
    text: str,
    selector: str = "body *",
    screenshot: Path,
    viewport: tuple[int, int] = (1280, 800),
    dark: bool = False,
    full_page: bool = False,
    browser: Browser | None = None,
    probe: str | None = None,
    act: Callable[[Page], Any] | None = None,
) -> PageCheck:
    """Load `html_path` with all network blocked; record loads, console, screenshot, fold check.

    Pass a `browser` from `launch_chromium()` to share one launch between pages;
    without one, a browser is started for this call alone. `probe`, a
    function in JavaScript, is evaluated in the settled page: what it returns
    is `probed`, to check the layout as a reader's browser made it. `act` is then
    called with the page (to click, say), after the screenshot: what it returns is `acted`.
    """
    if browser is None:
        with launch_chromium() as own:
            return check_page(
                html_path,
                text=text,
                selector=selector,
                screenshot=screenshot,
                viewport=viewport,
                dark=dark,
                full_page=full_page,
                browser=own,
                probe=probe,
                act=act,
            )

    page_url = html_path.resolve().as_uri()
    width, height = viewport
    requests: list[str] = []
    console: list[str] = []
    page_errors: list[str] = []

    def block(route: Route) -> None:
        # Only the page itself may load; everything else (http, https, or another
        # file beside it) is recorded and aborted before any socket is opened.
        if route.request.url == page_url and route.request.resource_type == "document":
            route.continue_()
            return
        requests.append(route.request.url)
        route.abort()

    def block_websocket(ws: WebSocketRoute) -> None:
        # A routed WebSocket that never calls connect_to_server stays inside the browser.
        requests.append(ws.url)
        ws.close()

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            where = message.location.get("url") or ""
            console.append(f"{message.type}: {message.text}" + (f" ({where})" if where else ""))

    context = browser.new_context(
        viewport={"width": width, "height": height},
        color_scheme="dark" if dark else "light",
        service_workers="block",
    )
    try:
        context.route("**/*", block)
        context.route_web_socket("**/*", block_websocket)
        page = context.new_page()
        page.on("console", on_console)
        page.on("pageerror", lambda error: page_errors.append(f"pageerror: {error}"))
        page.goto(page_url, wait_until="load")
        page.evaluate(_SETTLE_JS)
        for hint in page.evaluate(_HINTS_JS):
            if hint not in requests:
                requests.append(hint)
        found = page.evaluate(_FIND_TEXT_JS, [selector, text])
        probed = page.evaluate(probe) if probe is not None else None
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=full_page)
        acted = act(page) if act is not None else None
    finally:
        context.close()

    def above_fold(box: dict) -> bool:
        return (
            box["shown"]
            and box["x"] >= -_EDGE_SLACK
            and box["y"] >= -_EDGE_SLACK
            and box["x"] + box["width"] <= width + _EDGE_SLACK
            and box["y"] + box["height"] <= height + _EDGE_SLACK
        )

    # The first occurrence in view wins; else report the first shown one, so a
    # failing assertion says where the text went.
    chosen = next((b for b in found if above_fold(b)), None)
    fallback = next((b for b in found if b["shown"]), found[0] if found else None)
    box = chosen or fallback
    return PageCheck(
        requests=requests,
        console=console + page_errors,
        screenshot=screenshot,
        visible_above_fold=chosen is not None,
        text_box=None if box is None else {k: box[k] for k in ("x", "y", "width", "height")},
        probed=probed,
        acted=acted,
    )
