"""End to end in real headless Chromium: daphne, a Celery worker, the demo agent.

Needs Debian's Chromium at /usr/bin/chromium (`make chromium` installs it); Playwright
drives it, no browser is downloaded. Screenshots land in test-artifacts/.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hitl.core import decisions
from hitl.core.models import HumanInterrupt, Thread
from tests.conftest import ROOT, wait_for
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def chromium():
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.fail("Chromium is missing: run `make chromium` (apt-get install chromium).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium, monkeypatch):
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test
    # makes between browser steps are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    contexts = []

    def new_page(base_url: str, username: str):
        context = chromium.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", f"pw-{username}")
        page.click("button[type=submit]")
        page.wait_for_url(base_url + "/")
        return page

    new_page.contexts = contexts  # read by describe_pages when the test fails
    yield new_page
    for context in contexts:
        context.close()


def describe_pages(new_page) -> str:
    """What each of a failed test's pages showed: its address, its sockets' states, its
    cards and rows, and the errors it threw (the report says what went wrong there)."""
    lines = []
    for context in getattr(new_page, "contexts", []):
        for page in context.pages:
            try:
                shown = page.evaluate(
                    """() => ({
                      live: Array.from(document.querySelectorAll("[data-state]"))
                        .map(e => e.id + "=" + e.dataset.state),
                      items: Array.from(document.querySelectorAll("article.interrupt, tr.row"))
                        .map(e => e.id + (e.className ? "." + e.className.split(" ").join(".") : "")),
                    })"""
                )
            except Exception as exc:  # a page that is navigating or crashed
                shown = f"unreadable: {exc}"
            lines.append(f"{page.url}: {shown}; errors {getattr(page, 'errors', [])}")
    return "\n".join(lines)


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def mark_no_reload(page) -> None:
    """Leave a marker on the window: it survives only if the page is not reloaded."""
    page.evaluate("window.__noReload = true")


def assert_not_reloaded(page) -> None:
    assert page.evaluate("window.__noReload === true"), "the page was reloaded"


def test_demo_agent_end_to_end(asgi_server, celery_worker, browser_page, reviewer):
    page = browser_page(asgi_server, "rita")
    inbox = browser_page(asgi_server, "rita")  # a second tab on the inbox, watching live
    inbox.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(inbox)

    page.goto("/threads/new/")
    page.select_option("#id_graph", "demo")
    page.fill("#id_title", "Quarterly sales report")
    page.click("button.primary")
    page.wait_for_url("**/threads/*/")
    thread_url = page.url
    thread = Thread.objects.get(title="Quarterly sales report")
    page.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(page)

    # The clarification arrives over the socket, options as buttons.
    page.wait_for_selector("article.interrupt button.option:has-text('Q3 2025')")
    assert_not_reloaded(page)
    assert "Which quarter should the sales report cover?" in page.inner_text("article.interrupt")
    inbox.wait_for_selector("tr.interrupt-row:has-text('Which quarter')")
    assert_not_reloaded(inbox)
    shot(page, "e2e-1-clarification")
    shot(inbox, "e2e-1-inbox")

    # Through a locator: a live update may replace the untouched card meanwhile.
    page.locator("article.interrupt button.option:has-text('Q3 2025')").click()
    page.wait_for_url(thread_url)  # nothing else pending: back on this thread
    assert "Answer sent" in page.inner_text(".flashes")
    mark_no_reload(page)
    # Answered: gone from the other tab's inbox without a reload.
    inbox.wait_for_selector("tr.interrupt-row:has-text('Which quarter')", state="detached")
    assert_not_reloaded(inbox)

    # The approval arrives live; the recipient is an editable, typed field.
    to = page.wait_for_selector("article.interrupt input[data-key=to]")
    assert_not_reloaded(page)
    assert to.input_value() == "finance-team@example.com"
    # Files presented before the approval are already on the page.
    page.wait_for_selector("figure.artifact-csv table.csv")
    shot(page, "e2e-2-approval")
    page.locator("article.interrupt input[data-key=to]").fill("cfo@example.com")
    assert "dirty" in page.get_attribute("article.interrupt", "class")
    page.click("article.interrupt button.btn-edit")
    page.wait_for_url(thread_url)
    mark_no_reload(page)

    # The run resumes on the worker; the final result and the files show up live.
    result = page.wait_for_selector("#final-result")
    assert_not_reloaded(page)
    assert "cfo@example.com" in result.inner_text()
    page.wait_for_selector("#section-status .status-done")
    image = page.wait_for_selector("figure.artifact-image img")
    wait_for(lambda: image.evaluate("img => img.complete && img.naturalWidth > 0"), what="chart")
    csv = page.inner_text("figure.artifact-csv table.csv")
    assert "region" in csv and "revenue" in csv
    shot(page, "e2e-3-result")

    answered = HumanInterrupt.objects.filter(thread=thread).order_by("created_at")
    assert [(r.action, r.response_type) for r in answered] == [
        ("ask_clarification", "response"),
        ("send_email", "edit"),
    ]
    assert answered[1].response_args["args"]["to"] == "cfo@example.com"
    assert page.errors == [] and inbox.errors == []


def test_keyboard_race_and_resync(asgi_server, browser_page, reviewer, second_reviewer, settings):
    settings.HITL_EXECUTOR = "manual"  # nothing resumes; this test is about the page
    requester = reviewer
    thread, (first, second) = open_interrupts(
        user=requester,
        values=[human_interrupt("send_email"), human_interrupt("delete_file", {"path": "a"})],
        title="Two requests",
    )
    _, (quick,) = open_interrupts(user=requester, values=[human_interrupt("archive")])
    rita = browser_page(asgi_server, "rita")
    sam = browser_page(asgi_server, "sam")

    # Keyboard in the inbox: "a" accepts the selected row (the newest) in place.
    rita.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(rita)
    assert rita.get_attribute("tr.row.selected", "id") == f"row-{quick.pk}"
    rita.keyboard.press("a")
    rita.wait_for_selector(f"#row-{quick.pk}", state="detached")
    assert_not_reloaded(rita)
    wait_for(lambda: HumanInterrupt.objects.get(pk=quick.pk).status == "resolved", what="accept")
    assert rita.inner_text("#pending-badge") == "2"
    # ? shows the help; j/k select, Enter opens.
    rita.keyboard.press("?")
    assert rita.is_visible("#help")
    rita.keyboard.press("Escape")
    rita.keyboard.press("j")
    rita.keyboard.press("k")
    selected = rita.get_attribute("tr.row.selected", "id")
    assert selected in (f"row-{first.pk}", f"row-{second.pk}")
    rita.keyboard.press("Enter")
    rita.wait_for_url(f"**/threads/{thread.pk}/**")

    # Sam has the same thread open; Rita accepts the first card with "a".
    sam.goto(f"/threads/{thread.pk}/")
    sam.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(sam)
    rita.wait_for_selector(f"#interrupt-{first.pk}")
    rita.click(f"#interrupt-{first.pk} .interrupt-head")
    with rita.expect_navigation():
        rita.keyboard.press("a")
    assert rita.url.endswith(f"/threads/{thread.pk}/#interrupt-{second.pk}")  # the next item
    assert "Approved: send email (item 1 of 2) on “Two requests”" in rita.inner_text(".flashes")
    first.refresh_from_db()
    assert (first.status, first.responded_by_id) == ("resolved", reviewer.pk)
    note = sam.wait_for_selector(f"#interrupt-{first.pk} .form-error")
    assert note.inner_text() == "Already answered by rita."
    assert_not_reloaded(sam)
    shot(sam, "e2e-4-already-answered")

    # Sam's socket drops; while it is down Rita answers the second one. The page
    # reconnects and resyncs: the card goes away although its event was missed.
    sam.wait_for_selector(f"#interrupt-{first.pk}", state="detached")
    sam.evaluate("HITL.thread.drop()")
    decisions.interrupt_resolve(interrupt_id=second.pk, user=reviewer, response_type="ignore")
    sam.wait_for_selector(f"#interrupt-{second.pk}", state="detached")
    sam.wait_for_selector("#live-indicator[data-state=live]")
    assert_not_reloaded(sam)
    assert rita.errors == [] and sam.errors == []


# Counts the page's resyncs (a full read of what it shows, on every socket hello).
COUNT_RESYNCS = (
    "window.__resynced = 0;"
    "document.addEventListener('hitl:resynced', function () { window.__resynced += 1; });"
)


def hold_next_read(page, matches) -> tuple[Any, Any]:
    """Hold the page's next request that `matches`; return it, answered from the server
    as it is now, once the page has sent it. The test fulfils it when it likes."""
    held: list = []

    def hold(route) -> None:
        if held:
            route.continue_()  # the ones after it go through
        else:
            held.append(route)

    page.route(matches, hold)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not held:  # the handler runs while Playwright is called: give it turns
        assert time.monotonic() < deadline, "the page never asked"
        page.wait_for_timeout(10)
    route = held[0]
    return route, route.fetch()


def open_counting_resyncs(page, path: str) -> None:
    """Open `path` with its resyncs counted, once its first one is done."""
    page.context.add_init_script(COUNT_RESYNCS)
    page.goto(path)
    page.wait_for_function("() => window.__resynced === 1")


def hold_thread_pages_next_read(page) -> tuple[Any, Any]:
    """Drop the thread page's socket and hold the read its reconnect makes."""
    live = page.get_attribute("#thread", "data-live-url")
    page.evaluate("HITL.thread.drop()")
    return hold_next_read(page, lambda url: url.endswith(live))


def test_a_card_pushed_while_the_thread_page_resyncs_stays(
    asgi_server, browser_page, reviewer, settings
):
    """A hello makes the page read its cards again. A card the socket brings while that
    read is on its way is newer than the read: its answer does not take the card away."""
    settings.HITL_EXECUTOR = "manual"  # nothing resumes; the test plays the worker
    thread, _ = open_interrupts(user=reviewer, values=[], title="Held resync")
    page = browser_page(asgi_server, "rita")
    open_counting_resyncs(page, f"/threads/{thread.pk}/")

    route, stale = hold_thread_pages_next_read(page)
    assert stale.json()["interrupts"] == []
    _, (row,) = open_interrupts(user=reviewer, values=[human_interrupt()], thread=thread)
    page.wait_for_selector(f"#interrupt-{row.pk} button[data-action=accept]")
    route.fulfill(response=stale)
    page.wait_for_function("() => window.__resynced === 2")
    assert page.is_visible(f"#interrupt-{row.pk}:not(.lost) button[data-action=accept]")
    assert page.errors == []


def test_a_row_pushed_while_the_inbox_resyncs_stays(asgi_server, browser_page, reviewer, settings):
    """The inbox's list read on a hello replaces the rows; one the socket pushed while the
    read was on its way is not in it, so the inbox reads once more and shows it."""
    settings.HITL_EXECUTOR = "manual"
    open_interrupts(user=reviewer, values=[human_interrupt("archive")], title="Listed")
    page = browser_page(asgi_server, "rita")
    open_counting_resyncs(page, "/")
    assert page.inner_text("#pending-badge") == "1"

    page.evaluate("HITL.inbox.drop()")
    route, stale = hold_next_read(page, lambda url: "partial=1" in url)
    _, (row,) = open_interrupts(user=reviewer, values=[human_interrupt()], title="Pushed")
    page.wait_for_selector(f"#row-{row.pk}")
    assert f"row-{row.pk}" not in stale.text()
    route.fulfill(response=stale)
    page.wait_for_function("() => window.__resynced === 2")
    assert page.is_visible(f"#row-{row.pk}")
    assert page.inner_text("#pending-badge") == "2"
    assert page.errors == []


def test_a_card_answered_while_the_thread_page_resyncs_stays_gone(
    asgi_server, browser_page, reviewer, settings
):
    """The other way round: a card the socket retired while the read was on its way is
    still pending in that read, and does not come back."""
    settings.HITL_EXECUTOR = "manual"
    thread, (first, second) = open_interrupts(
        user=reviewer, values=[human_interrupt(), human_interrupt("archive")], title="Two"
    )
    page = browser_page(asgi_server, "rita")
    open_counting_resyncs(page, f"/threads/{thread.pk}/")

    route, stale = hold_thread_pages_next_read(page)
    assert len(stale.json()["interrupts"]) == 2
    decisions.interrupt_resolve(interrupt_id=first.pk, user=reviewer, response_type="accept")
    page.wait_for_selector(f"#interrupt-{first.pk}", state="detached")
    route.fulfill(response=stale)
    page.wait_for_function("() => window.__resynced === 2")
    assert page.query_selector(f"#interrupt-{first.pk}") is None
    assert page.is_visible(f"#interrupt-{second.pk} button[data-action=accept]")
    assert page.errors == []
