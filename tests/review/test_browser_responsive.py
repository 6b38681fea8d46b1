"""Phones in real headless Chromium: no sideways scroll at 360 and 390 px, a header menu,
inbox rows as cards, the thread page's columns stacked.

Screenshots (390x844 and 1366x900) land in test-artifacts/, or in $HITL_SHOTS_DIR.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts

chromium = base.chromium

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

PHONE = {"width": 390, "height": 844}
SMALL_PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1366, "height": 900}


def shots_dir() -> Path:
    path = Path(os.environ.get("HITL_SHOTS_DIR") or base.ARTIFACTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page_at(chromium, monkeypatch):
    """A logged-in page with a given viewport."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    contexts = []

    def make(base_url: str, username: str, viewport: dict):
        context = chromium.new_context(base_url=base_url, viewport=viewport)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(base.TIMEOUT_MS)
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", f"pw-{username}")
        page.click("button[type=submit]")
        page.wait_for_url(base_url + "/")
        return page

    yield make
    for context in contexts:
        context.close()


def widths(page) -> dict:
    return page.evaluate(
        "() => ({page: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),"
        " viewport: window.innerWidth})"
    )


_INSIDE = """(selector) => {
    const el = document.querySelector(selector);
    if (!el) return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.left >= 0 && box.right <= window.innerWidth;
}"""

_NO_SIDEWAYS = """() => Math.max(document.documentElement.scrollWidth,
                           document.body.scrollWidth) <= window.innerWidth"""


_COLUMNS = """(stacked) => {
    const main = document.querySelector(".col-main").getBoundingClientRect();
    const side = document.querySelector(".col-side").getBoundingClientRect();
    return stacked ? side.top >= main.bottom - 1 : side.left >= main.right;
}"""


def inside_viewport(page, selector: str) -> bool:
    """Whether the first element the CSS `selector` matches lies inside the screen once
    layout settles (a busy machine may still be applying styles or a transition when the
    check starts). The selector is matched again at each poll: the inbox's first resync
    replaces its rows, and an element found before it is detached, with an empty box."""
    try:
        page.wait_for_function(_INSIDE, arg=selector, timeout=10_000)
    except PlaywrightTimeout:
        return False
    return True


def settled_widths(page) -> dict:
    """The page's and the screen's width, once the page stops scrolling sideways (or
    after 10 s, when it does and the caller's assertion then says so)."""
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(_NO_SIDEWAYS, timeout=10_000)
    return widths(page)


def reviewed_data(user):
    thread, rows = open_interrupts(
        user=user,
        values=[
            human_interrupt(
                "send_email",
                {"to": "finance-team@example.com", "subject": "Q3 sales report, final figures"},
                description="Send the **quarterly report** to the finance team?",
            ),
            human_interrupt("archive_report", {"path": "/mnt/user-data/outputs/q3.csv"}),
        ],
        title="Quarterly sales report for the finance team",
    )
    open_interrupts(
        user=user,
        values=[human_interrupt("delete_file", {"path": "/tmp/a-rather-long-file-name.txt"})],
        title="Clean up the workspace",
    )
    return thread, rows


def test_inbox_and_thread_fit_phones_and_desktops(asgi_server, page_at, reviewer, settings):
    settings.HITL_EXECUTOR = "manual"
    thread, _ = reviewed_data(reviewer)
    out = shots_dir()
    measured = {}
    for name, viewport in (("390x844", PHONE), ("360x740", SMALL_PHONE), ("1366x900", DESKTOP)):
        narrow = viewport["width"] < 700
        page = page_at(asgi_server, "rita", viewport)
        page.wait_for_selector("#live-indicator[data-state=live]")
        page.screenshot(path=str(out / f"inbox-{name}.png"), full_page=False)
        measured[f"inbox-{name}"] = settled_widths(page)
        # Every row shows its group and how long it waits, inside the screen.
        for cell in ("td .chip.group", "td.age time", "a.title"):
            assert inside_viewport(page, f"tr.row {cell}"), (name, cell)
        assert page.is_visible("tr.row td.age time"), name
        # The header's right side: behind a menu on phones, in the bar on desktops.
        logout = page.locator("header.top button:has-text('Log out')")
        assert page.is_visible("#menu-toggle") is narrow
        if narrow:
            assert not logout.is_visible()
            page.click("#menu-toggle")
            assert page.get_attribute("#menu-toggle", "aria-expanded") == "true"
            measured[f"inbox-menu-{name}"] = settled_widths(page)
            if name == "390x844":
                page.screenshot(path=str(out / f"inbox-menu-{name}.png"), full_page=False)
            page.keyboard.press("Escape")
            assert page.get_attribute("#menu-toggle", "aria-expanded") == "false"
            page.click("#menu-toggle")
        assert logout.is_visible() and inside_viewport(
            page, "header.top form[action$='/logout/'] button"
        )
        assert inside_viewport(page, "#help-toggle")

        page.goto(f"/threads/{thread.pk}/")
        page.wait_for_selector("article.interrupt")
        # Measured once the socket's first resync has settled the sections.
        page.wait_for_selector("#live-indicator[data-state=live]")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(out / f"thread-{name}.png"), full_page=False)
        measured[f"thread-{name}"] = settled_widths(page)
        with contextlib.suppress(PlaywrightTimeout):  # the layout's final form, then measure
            page.wait_for_function(_COLUMNS, arg=narrow, timeout=10_000)
        main = page.locator(".col-main").bounding_box()
        side = page.locator(".col-side").bounding_box()
        if narrow:  # stacked: the runs come below the decisions
            assert side["y"] >= main["y"] + main["height"] - 1, (name, main, side)
        else:  # side by side
            assert side["x"] >= main["x"] + main["width"], (name, main, side)
        assert inside_viewport(page, "article.interrupt button.btn-ignore"), name
        assert page.errors == [], (name, page.errors)
    for key, value in measured.items():
        assert value["page"] <= value["viewport"], f"{key} scrolls sideways: {value}"
