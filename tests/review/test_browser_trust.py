"""Reviewer trust in real headless Chromium (issue 28): a decision only ever acts on an
item the reviewer has seen, and every message names the thread it is about."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hitl.core import decisions
from hitl.core.decisions import claims
from hitl.core.models import HumanInterrupt
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser import mark_no_reload

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def status(row) -> str:
    return HumanInterrupt.objects.get(pk=row.pk).status


def mail(user, title: str, to: str, **args):
    thread, (row,) = open_interrupts(
        user=user, values=[human_interrupt("send_email", {"to": to, **args})], title=title
    )
    return thread, row


def dialogs(page) -> list[str]:
    """Every dialog the page opens, answered by the next entry of `page.answers`
    (dismissed when none is left)."""
    seen: list[str] = []
    page.answers = []

    def answer(dialog):
        seen.append(dialog.message)
        if page.answers and page.answers.pop(0):
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", answer)
    return seen


def test_after_a_decision_the_page_stays_and_offers_only_an_item_nobody_else_is_on(
    asgi_server, browser_page, requester, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    # Oldest first: free, snoozed by rita, claimed by sam, then the one rita decides.
    _, free = mail(requester, "Mail to bob", "bob@example.com")
    _, snoozed = mail(requester, "Mail to ann", "ann@example.com")
    _, claimed = mail(requester, "Mail to legal", "legal@example.com")
    thread, decided = mail(requester, "Mail to cfo", "cfo@example.com")
    claims.interrupt_claim(interrupt_id=claimed.pk, user=second_reviewer)
    claims.interrupt_snooze(
        interrupt_id=snoozed.pk, user=reviewer, until=timezone.now() + timedelta(hours=1)
    )

    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    with rita.expect_navigation():
        rita.click(f"#interrupt-{decided.pk} .btn-accept")
    # Still on the decided thread (its agent resumes here), told which thread it was.
    assert rita.url.startswith(f"{asgi_server}/threads/{thread.pk}/")
    assert "Approved: send email on “Mail to cfo”" in rita.inner_text(".flashes")
    # The next item is offered by name: the free one, not sam's nor the snoozed one.
    offer = rita.wait_for_selector("#next-item a")
    assert "Mail to bob" in offer.inner_text()
    assert offer.get_attribute("href").endswith(f"#interrupt-{free.pk}")
    base.shot(rita, "trust-next-item")
    with rita.expect_navigation():
        rita.keyboard.press("n")
    assert rita.url.endswith(f"/threads/{free.thread_id}/#interrupt-{free.pk}")

    # "n" from the inbox skips sam's claim and rita's snooze as well.
    rita.goto("/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    with rita.expect_navigation():
        rita.keyboard.press("n")
    assert rita.url.endswith(f"#interrupt-{free.pk}")
    assert [status(r) for r in (free, snoozed, claimed)] == ["pending"] * 3
    assert rita.errors == []


def test_inbox_rows_show_key_args_and_a_asks_before_approving_unseen_ones(
    asgi_server, browser_page, requester, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    _, short = mail(requester, "Note to ann", "ann@example.com", subject="Hi")
    _, long = mail(
        requester,
        "Board mail",
        "cfo@example.com",
        subject="Q3",
        body="Numbers attached. " * 10,
        cc="legal@example.com",
    )
    _, (schema_row,) = open_interrupts(
        user=requester,
        values=[
            human_interrupt(
                "wire_money",
                {"memo": "rent", "iban": "DE89 3704", "amount": 12000},
                args_schema={"type": "object", "x-hitl-summary": ["amount", "iban"]},
            )
        ],
        title="Pay rent",
    )
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(rita)
    asked = dialogs(rita)

    # Rows tell look-alike requests apart: the args that matter, and what is left out.
    peek = rita.inner_text(f"#row-{long.pk} .args-peek")
    assert "to: cfo@example.com" in peek and "subject: Q3" in peek
    assert "+2 not shown" in peek  # body is cut, cc left out
    assert rita.inner_text(f"#row-{short.pk} .args-peek").split() == [
        "to:",
        "ann@example.com",
        "subject:",
        "Hi",
    ]
    # The tool's schema names the args that matter: amount and iban, not the memo.
    assert rita.inner_text(f"#row-{schema_row.pk} .args-peek").split()[:4] == [
        "amount:",
        "12000",
        "iban:",
        "DE89",
    ]
    base.shot(rita, "trust-inbox-args")

    # a on the row with unseen args asks once; Cancel leaves it pending.
    rita.keyboard.press("j")
    assert rita.get_attribute("tr.row.selected", "id") == f"row-{long.pk}"
    rita.keyboard.press("a")
    wait_for(lambda: len(asked) == 1, what="the question")
    assert "send_email on “Board mail”" in asked[0] and "cc, body (in full)" in asked[0]
    rita.wait_for_load_state("networkidle")
    assert status(long) == "pending"
    rita.answers.append(True)
    rita.keyboard.press("a")
    wait_for(lambda: status(long) == "resolved", what="the accept")
    assert len(asked) == 2
    rita.wait_for_selector(".toast:has-text('Approved: send email on “Board mail”')")

    # A row that shows every arg is approved without a question.
    rita.locator(f"#row-{short.pk} a.title").focus()
    rita.keyboard.press("a")
    wait_for(lambda: status(short) == "resolved", what="the accept")
    rita.wait_for_selector(".toast:has-text('on “Note to ann”')")
    assert len(asked) == 2
    assert rita.errors == []


@pytest.fixture
def grace(monkeypatch):
    """Bulk decisions under the same grace period as single ones (web process)."""
    monkeypatch.setenv("HITL_UNDO_SECONDS", "30")


def test_bulk_asks_first_names_each_thread_and_can_be_undone(
    grace, asgi_server, browser_page, requester, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    rows = [mail(requester, f"Invoice {n}", f"client{n}@example.com")[1] for n in range(4)]
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    asked = dialogs(rita)
    rita.check("#pick-page")
    rita.wait_for_selector("text=4 selected")

    # Four items: asked first, each named with its thread; Cancel sends nothing.
    rita.click("[data-bulk=accept]")
    wait_for(lambda: len(asked) == 1, what="the question")
    assert asked[0].startswith("Accept 4 items?")
    assert all(f"on “Invoice {n}”" in asked[0] for n in range(4))
    rita.wait_for_load_state("networkidle")
    assert [status(r) for r in rows] == ["pending"] * 4

    rita.answers.append(True)
    rita.click("[data-bulk=accept]")
    panel = rita.wait_for_selector("#bulk-result-panel")
    text = panel.inner_text()
    assert all(f"send email on “Invoice {n}”" in text for n in range(4))
    assert [status(r) for r in rows] == ["resolved"] * 4
    rita.wait_for_selector("#bulk-undo .countdown:has-text(' s)')")
    base.shot(rita, "trust-bulk-undo")

    # The same grace period as a single decision: Undo all puts every item back.
    rita.click("#bulk-undo")
    rita.wait_for_selector("#bulk-result-panel :text('Undone: 4 items wait again.')")
    assert [status(r) for r in rows] == ["pending"] * 4
    for row in rows:
        rita.wait_for_selector(f"#row-{row.pk}")
    assert rita.errors == []


def test_bulk_undo_refuses_what_is_not_the_users_own(client_for, reviewer, second_reviewer, paused):
    """The endpoint behind Undo all: someone else's decision, or garbage, changes nothing."""
    _, (row,) = paused(user=reviewer, values=[human_interrupt()])
    decisions.interrupt_resolve(
        interrupt_id=row.pk, user=second_reviewer, response_type="accept", grace=30
    )
    rita = client_for(reviewer)
    answer = rita.post("/interrupts/bulk/undo/", {"ids": [str(row.pk)]})
    assert answer.status_code == 409
    assert "Only a decision of your own" in answer.json()["message"]
    assert status(row) == "resolved"
    assert rita.post("/interrupts/bulk/undo/", {"ids": ["nope"]}).status_code == 400
    assert rita.post("/interrupts/bulk/undo/", {}).status_code == 400
    sam = client_for(second_reviewer)
    assert sam.post("/interrupts/bulk/undo/", {"ids": [str(row.pk)]}).json()["undone"] == [
        str(row.pk)
    ]
    assert status(row) == "pending"


# --- drafts: kept only when a send really failed ------------------------------------------


def drafts_in(page) -> list[str]:
    return page.evaluate(
        "() => Object.keys(sessionStorage).filter((k) => k.startsWith('hitl:draft:'))"
    )


def test_a_draft_is_kept_only_when_the_send_failed_and_never_over_changed_args(
    asgi_server, browser_page, requester, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    pay = {"iban": "DE89 3704", "amount": 12000}
    thread, (four, claimed, typed) = open_interrupts(
        user=requester,
        values=[
            human_interrupt("wire_transfer", pay, approvals={"required": 2}),
            human_interrupt("archive", {"path": "/tmp/a"}),
            human_interrupt("send_email", {"to": "a@b.c"}, approvals={"required": 2}),
        ],
        title="Pay and mail",
    )
    claims.interrupt_claim(interrupt_id=claimed.pk, user=second_reviewer)
    rita = browser_page(asgi_server, "rita")
    asked = dialogs(rita)
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")

    # An approval that does not complete the quorum was sent and answered: no draft,
    # no "restored" note, the form not switched to edit.
    with rita.expect_navigation():
        rita.click(f"#interrupt-{four.pk} .btn-accept")
    assert "Approval recorded (1 of 2 approvals)" in rita.inner_text(".flashes")
    assert rita.locator(".restored-draft").count() == 0
    assert "dirty" not in rita.get_attribute(f"#interrupt-{four.pk}", "class")
    assert drafts_in(rita) == []

    # A cancelled "sam is on it. Decide anyway?" sends nothing and keeps nothing.
    rita.click(f"#interrupt-{claimed.pk} .btn-accept")
    wait_for(lambda: len(asked) == 1, what="the claim question")
    assert "sam is on it" in asked[0]
    assert drafts_in(rita) == []
    assert status(claimed) == "pending"

    # A send that ended on the login page keeps its draft, but sam edited the args
    # meanwhile: typing the old ones back would revert his edit, so nothing is restored.
    card = f"#interrupt-{typed.pk}"
    rita.fill(f"{card} input[data-key=to]", "rita@example.com")
    rita.context.clear_cookies(name="sessionid")
    rita.click(f"{card} .btn-edit")
    rita.wait_for_url("**/login/?next=*")
    assert len(drafts_in(rita)) == 1
    decisions.interrupt_resolve(
        interrupt_id=typed.pk,
        user=second_reviewer,
        response_type="edit",
        args={"action": "send_email", "args": {"to": "sam@example.com"}},
    )
    rita.fill("#id_username", "rita")
    rita.fill("#id_password", "pw-rita")
    rita.click("button[type=submit]")
    rita.wait_for_url(f"**/threads/{thread.pk}/")
    assert rita.input_value(f"{card} input[data-key=to]") != "rita@example.com"
    note = rita.inner_text(f"{card} .restored-draft")
    assert "not restored: the args changed since" in note
    assert drafts_in(rita) == []
    typed.refresh_from_db()
    assert typed.approval_args == {"to": "sam@example.com"}
    assert rita.errors == []


# --- four-eyes as a reviewer expects --------------------------------------------------------


def test_four_eyes_two_reviewers_an_edit_arrives_live_and_a_stale_page_cannot_revert_it(
    asgi_server, browser_page, reviewer, second_reviewer, reviewers_group, settings
):
    from tests.conftest import _make_user

    settings.HITL_EXECUTOR = "manual"
    _make_user("tess", reviewers_group)
    # Rita asked for the transfer: she reviews in this group but may not approve it.
    thread, (row,) = open_interrupts(
        user=reviewer,
        values=[
            human_interrupt(
                "wire_transfer",
                {"iban": "DE89 3704", "amount": 12000},
                approvals={"required": 2},
            )
        ],
        title="Pay the supplier",
    )
    card = f"#interrupt-{row.pk}"
    url = f"/threads/{thread.pk}/"
    rita = browser_page(asgi_server, "rita")
    sam = browser_page(asgi_server, "sam")
    tess = browser_page(asgi_server, "tess")  # three browser contexts, three sessions
    stale = browser_page(asgi_server, "tess")
    for page in (rita, sam, tess, stale):
        page.goto(url)
        page.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(tess)

    # The requester is not offered Approve: disabled, and the card says why.
    assert rita.is_disabled(f"{card} .btn-accept") and rita.is_disabled(f"{card} .btn-edit")
    assert "You requested this thread" in rita.inner_text(f"{card} .approve-refusal")
    assert rita.is_enabled(f"{card} .btn-ignore")
    base.shot(rita, "trust-four-eyes-requester")

    # A page that stops hearing the socket keeps the old args (as a tab asleep would).
    stale.evaluate("() => window.HITL.thread.stop()")

    # Tess starts typing; sam edits the amount and approves it.
    tess.fill(f"{card} input[data-key=iban]", "DE00 TESS")
    sam.fill(f"{card} input[data-key=amount]", "9000")
    with sam.expect_navigation():
        sam.click(f"{card} .btn-edit")
    assert "Approval recorded (1 of 2 approvals)" in sam.inner_text(".flashes")
    assert sam.is_disabled(f"{card} .btn-accept")  # sam has approved these args
    assert "approved these args already" in sam.inner_text(f"{card} .approve-refusal")

    # Tess's page gets the new args live, the change highlighted, her typing set aside.
    tess.wait_for_selector(f"{card} .args-changed")
    assert "edited by sam (amount)" in tess.inner_text(f"{card} .args-changed")
    assert tess.input_value(f"{card} input[data-key=amount]") == "9000"
    assert tess.input_value(f"{card} input[data-key=iban]") == "DE89 3704"
    assert tess.locator(f"{card} .field.changed").count() == 1
    assert "iban: DE00 TESS" in tess.input_value(f"{card} textarea.lost-typed")
    assert_not_reloaded = base.assert_not_reloaded
    assert_not_reloaded(tess)
    base.shot(tess, "trust-four-eyes-live-edit")

    # The stale page sends the old args: refused, and nothing is put back to resend.
    assert stale.input_value(f"{card} input[data-key=amount]") == "12000"
    with stale.expect_navigation():
        stale.click(f"{card} .btn-edit")
    assert "args were edited since you opened this" in stale.inner_text(".flashes")
    assert stale.input_value(f"{card} input[data-key=amount]") == "9000"
    assert stale.locator(".restored-draft").count() == 0
    row.refresh_from_db()
    assert row.status == "pending" and row.approval_args["amount"] == 9000

    # Tess approves sam's args: resolved, and the edit is credited to sam.
    with tess.expect_navigation():
        tess.click(f"{card} .btn-accept")
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("resolved", "edit")
    assert row.response_args["args"]["amount"] == 9000
    decisions_panel = tess.inner_text("#section-runs .decisions")
    assert "edited by sam · approved by sam, tess" in decisions_panel
    assert not (rita.errors or sam.errors or tess.errors or stale.errors)
