"""Deliberate decisions, in real headless Chromium: keys, kept notes, races, failures.

Same set-up as test_browser.py: daphne, Debian's Chromium driven by Playwright.
"""

from __future__ import annotations

import os

import pytest

from hitl.core import decisions, runs
from hitl.core.live.publisher import publisher
from hitl.core.models import HumanInterrupt, Thread
from tests.conftest import ROOT, wait_for
from tests.graphs import WORKER_GRAPHS, register_in_process
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser import mark_no_reload

# The browser fixtures of test_browser.py, shared.
chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def statuses(*rows) -> list[str]:
    return [HumanInterrupt.objects.get(pk=r.pk).status for r in rows]


def settle(page) -> None:
    """Let any request a key press may have started reach the server."""
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)


def test_key_sequences_never_decide_by_accident(
    asgi_server, browser_page, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (first, second) = open_interrupts(
        user=reviewer,
        values=[human_interrupt("send_email"), human_interrupt("delete_file", {"path": "a"})],
        title="Two requests",
    )
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")

    # On the thread page: "g i" goes to the inbox; the "i" is not the ignore key.
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    assert "selected" in rita.get_attribute(f"#interrupt-{first.pk}", "class")
    with rita.expect_navigation():
        rita.keyboard.press("g")
        rita.keyboard.press("i")
    assert rita.url == asgi_server + "/"
    assert statuses(first, second) == ["pending", "pending"]

    # On the inbox: "g i" again, "g" then a decision key, and keys behind the help.
    rita.wait_for_selector("tr.row.selected")
    with rita.expect_navigation():
        rita.keyboard.press("g")
        rita.keyboard.press("i")
    rita.wait_for_selector("tr.row.selected")
    for key in ("a", "e", "r", "Enter", "n"):  # "g" then anything but "i" does nothing
        rita.keyboard.press("g")
        rita.keyboard.press(key)
    assert rita.url == asgi_server + "/"
    rita.keyboard.press("?")
    assert rita.is_visible("#help")
    for key in ("a", "i", "j", "k"):
        rita.keyboard.press(key)
    rita.keyboard.press("Escape")
    assert not rita.is_visible("#help")
    rita.keyboard.press("j")
    rita.keyboard.press("k")
    settle(rita)
    assert rita.url == asgi_server + "/"
    assert statuses(first, second) == ["pending", "pending"]

    # "e" and "r" open the item with a field focused; Esc leaves it; nothing is decided.
    with rita.expect_navigation():
        rita.keyboard.press("e")
    rita.wait_for_function("document.activeElement.closest('.args.editable') !== null")
    rita.keyboard.press("a")  # typed into the field, not a decision
    rita.keyboard.press("Escape")
    rita.keyboard.press("r")
    rita.wait_for_function("document.activeElement.matches('.respond textarea')")
    rita.keyboard.press("Escape")
    rita.keyboard.press("Enter")
    rita.keyboard.press("Escape")
    rita.keyboard.press("j")
    rita.keyboard.press("k")
    with rita.expect_navigation():
        rita.keyboard.press("n")
    settle(rita)
    assert statuses(first, second) == ["pending", "pending"]
    assert HumanInterrupt.objects.filter(thread=thread).exclude(status="pending").count() == 0

    # A decision key with no visibly selected item does nothing, and says so.
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    rita.click(f"#interrupt-{second.pk} .interrupt-head")
    decisions.interrupt_resolve(
        interrupt_id=second.pk, user=second_reviewer, response_type="accept"
    )
    rita.wait_for_selector(f"#interrupt-{second.pk} .form-error")
    rita.keyboard.press("i")
    rita.wait_for_selector(".toast:has-text('Select an item first')")
    settle(rita)
    assert statuses(first) == ["pending"]

    # Meant: the highlighted item, and only it, is decided.
    rita.click(f"#interrupt-{first.pk} .interrupt-head")
    with rita.expect_navigation():
        rita.keyboard.press("i")
    first.refresh_from_db()
    assert (first.status, first.response_type) == ("resolved", "ignore")
    assert rita.errors == []


def inbox_with_two_items(asgi_server, browser_page, reviewer):
    """Two pending items, the newer listed first, and rita's live inbox showing them."""
    _, (older,) = open_interrupts(user=reviewer, values=[human_interrupt("archive")])
    _, (newer,) = open_interrupts(user=reviewer, values=[human_interrupt("publish")])
    # Their live pushes are out before the page loads: none re-renders a row under j.
    publisher.flush()
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(rita)
    return older, newer, rita


def test_inbox_decision_keys_act_on_the_highlighted_row_only(
    asgi_server, browser_page, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    older, newer, rita = inbox_with_two_items(asgi_server, browser_page, reviewer)
    rita.keyboard.press("j")  # the older one, second row
    assert rita.get_attribute("tr.row.selected", "id") == f"row-{older.pk}"
    rita.keyboard.press("a")
    rita.wait_for_selector(f"#row-{older.pk}", state="detached")
    wait_for(lambda: statuses(older) == ["resolved"], what="accept")
    settle(rita)
    assert statuses(newer) == ["pending"]
    assert rita.errors == []


def test_a_key_pressed_while_the_inbox_resyncs_keeps_its_row(
    asgi_server, browser_page, reviewer, settings
):
    """The socket's first hello refetches the list. A j pressed while that fetch is on
    its way stays on the row it moved to: the refetched list does not put the selection
    back where it was when the fetch began (then a would decide the other item)."""
    settings.HITL_EXECUTOR = "manual"
    older, newer, rita = inbox_with_two_items(asgi_server, browser_page, reviewer)
    # A refetch whose body the test lets through when it chooses (as on a slow link).
    rita.evaluate(
        """() => {
            const fetchNow = window.fetch;
            window.fetch = (...args) => fetchNow(...args).then((r) => r.text()).then((body) => ({
                ok: true,
                text: () => new Promise((resolve) => {
                    window.releaseFetch = () => { window.fetch = fetchNow; resolve(body); };
                }),
            }));
            document.querySelector("#inbox tbody").dataset.stale = "1";
            document.dispatchEvent(new CustomEvent("hitl:inbox-open"));
        }"""
    )
    rita.wait_for_function("() => Boolean(window.releaseFetch)")
    rita.keyboard.press("j")
    assert rita.get_attribute("tr.row.selected", "id") == f"row-{older.pk}"
    rita.evaluate("() => window.releaseFetch()")
    rita.wait_for_selector("#inbox tbody:not([data-stale])", state="attached")
    assert rita.get_attribute("tr.row.selected", "id") == f"row-{older.pk}"
    rita.keyboard.press("a")
    wait_for(lambda: statuses(older) == ["resolved"], what="accept")
    settle(rita)
    assert statuses(newer) == ["pending"]
    assert rita.errors == []


def test_a_typed_note_is_kept_until_sent(asgi_server, browser_page, reviewer, settings):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(user=reviewer, values=[human_interrupt()])
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    card = f"#interrupt-{row.pk}"
    rita.fill(f"{card} .respond textarea", "Please cc legal.")
    assert rita.is_disabled(f"{card} .btn-accept") and rita.is_disabled(f"{card} .btn-edit")
    assert rita.is_disabled(f"{card} .btn-ignore") and rita.is_enabled(f"{card} .btn-respond")
    hint = rita.inner_text(f"{card} .note-hint")
    assert "sent only with Respond" in hint
    base.shot(rita, "decisions-note-kept")
    rita.keyboard.press("Escape")
    rita.keyboard.press("a")
    rita.wait_for_selector(".toast:has-text('Your note is sent only with Respond')")
    settle(rita)
    assert statuses(row) == ["pending"]
    assert rita.input_value(f"{card} .respond textarea") == "Please cc legal."
    rita.fill(f"{card} .respond textarea", "")
    assert rita.is_enabled(f"{card} .btn-accept") and not rita.is_visible(f"{card} .note-hint")
    rita.fill(f"{card} .respond textarea", "Please cc legal.")
    with rita.expect_navigation():
        rita.click(f"{card} .btn-respond")
    row.refresh_from_db()
    assert (row.response_type, row.response_args) == ("response", "Please cc legal.")
    assert rita.errors == []


def test_the_race_loser_sees_what_won_and_keeps_their_edit(
    asgi_server, browser_page, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(
        user=reviewer, values=[human_interrupt(args={"to": "a@b.c", "subject": "Q3"})]
    )
    sam = browser_page(asgi_server, "sam")
    sam.goto(f"/threads/{thread.pk}/")
    sam.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(sam)
    card = f"#interrupt-{row.pk}"
    sam.fill(f"{card} input[data-key=to]", "legal@example.com")
    decisions.interrupt_resolve(
        interrupt_id=row.pk,
        user=reviewer,
        response_type="edit",
        args={"action": "send_email", "args": {"to": "cfo@example.com", "subject": "Q3"}},
    )
    note = sam.wait_for_selector(f"{card} .form-error")
    assert note.inner_text() == "Already answered by rita. What you typed here was not sent."
    outcome = sam.wait_for_selector(f"{card} .outcome")
    assert "rita edited and approved it" in outcome.inner_text()
    assert "cfo@example.com" in outcome.inner_text()
    assert sam.input_value(f"{card} textarea.lost-typed") == "to: legal@example.com"
    base.shot(sam, "decisions-race-loser")
    sam.wait_for_timeout(9000)  # longer than an untouched card stays
    assert sam.is_visible(card)
    sam.click(f"{card} button:has-text('Dismiss')")
    sam.wait_for_selector(card, state="detached")
    base.assert_not_reloaded(sam)
    row.refresh_from_db()
    assert row.response_args["args"]["to"] == "cfo@example.com"
    assert sam.errors == []


@pytest.fixture
def test_graphs(monkeypatch):
    """The test graphs, in this process and in the web and worker processes it starts."""
    monkeypatch.setenv("HITL_EXTRA_GRAPHS", WORKER_GRAPHS)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    register_in_process(monkeypatch)


def test_a_failed_approved_action_shows_as_failed(
    test_graphs, asgi_server, worker_factory, browser_page, reviewer
):
    worker_factory("w1")
    run = runs.run_start(
        graph="failing_tool", input={"request": "notify"}, user=reviewer, title="Notify Ann"
    )
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{run.thread_id}/")
    accept = rita.wait_for_selector("article.interrupt .btn-accept")
    mark_no_reload(rita)
    with rita.expect_navigation():
        accept.click()
    banner = rita.wait_for_selector("#failed-actions")
    text = banner.inner_text()
    assert "The approved action failed".lower() in text.lower()
    assert "notify customer" in text and "approved by rita" in text
    assert "The mail server refused ann@bounce.example.com: mailbox full." in text
    try:
        rita.wait_for_selector("#section-status .status-action-failed", timeout=15000)
    except Exception:  # the run ended before the new page's socket joined: read it afresh
        rita.reload()
        rita.wait_for_selector("#section-status .status-action-failed")
    assert "action failed" in rita.inner_text("#section-runs")
    base.shot(rita, "decisions-action-failed")
    # The agent went on and finished; the thread's real status is kept for the API.
    wait_for(lambda: Thread.objects.get(pk=run.thread_id).status == "done", what="done")
    assert rita.errors == []
