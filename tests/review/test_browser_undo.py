"""Undo in real headless Chromium: the toast, racing a second reviewer, and too late.

daphne and a Celery worker run with HITL_UNDO_SECONDS=4 (the suite otherwise uses 0).
"""

from __future__ import annotations

import pytest

from hitl.core import decisions, errors, runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

chromium = base.chromium
browser_page = base.browser_page
GRACE = 4


@pytest.fixture
def grace(monkeypatch):
    """The grace period for the web and worker processes this test starts."""
    monkeypatch.setenv("HITL_UNDO_SECONDS", str(GRACE))


def resumes(thread_id) -> int:
    return Run.objects.filter(thread_id=thread_id, kind="resume").count()


def test_undo_races_a_second_reviewer_and_is_refused_after_the_grace_period(
    grace, asgi_server, celery_worker, browser_page, reviewer, second_reviewer
):
    run = runs.run_start(graph="demo", input={}, user=reviewer, title="Sales report")
    url = f"/threads/{run.thread_id}/"
    rita, sam = browser_page(asgi_server, "rita"), browser_page(asgi_server, "sam")
    for page in (rita, sam):
        page.goto(url)
        page.wait_for_selector("#live-indicator[data-state=live]")
    option = rita.wait_for_selector("article.interrupt button.option:has-text('Q3 2025')")
    sam.wait_for_selector("article.interrupt button.option:has-text('Q3 2025')")
    row = HumanInterrupt.objects.get(thread_id=run.thread_id)
    card = f"#interrupt-{row.pk}"

    # Rita answers: stored and audited at once, an Undo toast, no resume yet.
    with rita.expect_navigation():
        option.click()
    toast = rita.wait_for_selector(f"#undo-{row.pk}")
    assert "Answer sent: “Which quarter should the sales report cover?”" in toast.inner_text()
    assert "Undo" in toast.inner_text()
    base.shot(rita, "undo-1-toast")
    row.refresh_from_db()
    assert row.status == "resolved" and row.undo_until is not None
    assert AuditEvent.objects.filter(interrupt=row, kind="interrupt.answered").exists()
    assert resumes(run.thread_id) == 0
    # Sam is told it is decided, and cannot answer it meanwhile.
    sam.wait_for_selector(f"{card} .form-error:has-text('Already answered by rita')")
    with pytest.raises(errors.Conflict, match="who may still undo"):
        decisions.interrupt_resolve(
            interrupt_id=row.pk, user=second_reviewer, response_type="response", args="Q1"
        )

    # Rita undoes: pending again, live on both pages, audited, still no resume.
    with rita.expect_navigation():
        rita.click(f"#undo-{row.pk} .undo-button")
    assert "is waiting for a decision again" in rita.inner_text(".flashes")
    rita.wait_for_selector(f"{card} button.option:has-text('Q2 2025')")
    sam.wait_for_selector(f"{card} button.option:has-text('Q2 2025')")
    assert AuditEvent.objects.filter(interrupt=row, kind="interrupt.undone").exists()
    assert "Interrupt Undone" in rita.inner_text("#audit-trail")
    row.refresh_from_db()
    assert row.status == "pending"

    # Sam answers now; his grace period runs out, the agent resumes, undo is refused.
    with sam.expect_navigation():
        sam.click(f"{card} button.option:has-text('Q2 2025')")
    sam.wait_for_selector(f"#undo-{row.pk}")
    assert resumes(run.thread_id) == 0
    sam.wait_for_selector(f"#undo-{row.pk}:has-text('Sent to the agent')", timeout=15_000)
    wait_for(lambda: resumes(run.thread_id) == 1, 15, what="the resume after the grace period")
    late = sam.evaluate(
        """async (url) => {
            const body = new FormData();
            body.append("csrfmiddlewaretoken", HITL.csrfToken());
            const r = await fetch(url, {method: "POST", body, headers: {Accept: "application/json"}});
            return [r.status, (await r.json()).error];
        }""",
        f"/interrupts/{row.pk}/undo/",
    )
    assert late == [409, "Too late to undo: the grace period has ended and the agent resumed."]
    row.refresh_from_db()
    assert (row.status, row.response_args, row.responded_by) == (
        "resolved",
        "Q2 2025",
        second_reviewer,
    )
    # The graph went on with Sam's answer: the email approval for Q2 arrives.
    sam.wait_for_selector("article.interrupt input[data-key=subject][value='Sales report Q2 2025']")
    assert rita.errors == [] and sam.errors == []


def test_undo_from_the_inbox_brings_the_row_back(grace, asgi_server, browser_page, reviewer):
    _, (row,) = open_interrupts(user=reviewer, values=[human_interrupt("archive")])
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    base.mark_no_reload(rita)
    assert rita.get_attribute("tr.row.selected", "id") == f"row-{row.pk}"
    rita.keyboard.press("a")
    rita.wait_for_selector(f"#row-{row.pk}", state="detached")
    toast = rita.wait_for_selector(".undo-toast:has-text('Approved: archive on “approval”')")
    base.shot(rita, "undo-2-inbox-toast")
    wait_for(lambda: HumanInterrupt.objects.get(pk=row.pk).status == "resolved", what="accept")
    toast.query_selector(".undo-button").click()
    rita.wait_for_selector(f"#row-{row.pk}")
    rita.wait_for_selector(".toast:has-text('is waiting for a decision again')")
    base.assert_not_reloaded(rita)
    row.refresh_from_db()
    assert row.status == "pending" and row.responded_by is None
    assert rita.errors == []


def test_undo_after_accept_as_proposed_gives_back_the_typed_edit(
    grace, asgi_server, browser_page, reviewer
):
    thread, (row,) = open_interrupts(
        user=reviewer,
        values=[human_interrupt("route_ticket", {"queue": "escalations", "priority": 2})],
        title="Printer on fire",
    )
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    card = f"#interrupt-{row.pk}"
    rita.fill(f"{card} input[data-key=queue]", "support")
    assert rita.inner_text(f"{card} .btn-accept").startswith("Accept as proposed")

    # Accepting as proposed says the typed edit was not sent, and Undo gives it back.
    with rita.expect_navigation():
        rita.click(f"{card} .btn-accept")
    toast = rita.wait_for_selector(f"#undo-{row.pk}")
    assert "your typed edit was not sent (Undo gives it back)" in toast.inner_text()
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("resolved", "accept")
    with rita.expect_navigation():
        rita.click(f"#undo-{row.pk} .undo-button")
    assert "Your typed edit is back in the card" in rita.inner_text(".flashes")
    field = rita.wait_for_selector(f"{card} input[data-key=queue]")
    assert field.input_value() == "support"
    assert rita.input_value(f"{card} input[data-key=priority]") == "2"
    assert "Your typed edit is back" in rita.inner_text(f"{card} .restored-note")
    assert "dirty" in rita.get_attribute(card, "class")
    assert rita.inner_text(f"{card} .btn-accept").startswith("Accept as proposed")
    for width in (390, 1366):
        rita.set_viewport_size({"width": width, "height": 900})
        base.shot(rita, f"undo-3-typed-edit-back-{width}")

    # Sending it now sends the edit the reviewer typed.
    with rita.expect_navigation():
        rita.click(f"{card} .btn-edit")
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("resolved", "edit")
    assert row.response_args["args"] == {"queue": "support", "priority": 2}
    assert rita.errors == []
