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
    toast = rita.wait_for_selector(".undo-toast:has-text('Approved: archive.')")
    base.shot(rita, "undo-2-inbox-toast")
    wait_for(lambda: HumanInterrupt.objects.get(pk=row.pk).status == "resolved", what="accept")
    toast.query_selector(".undo-button").click()
    rita.wait_for_selector(f"#row-{row.pk}")
    rita.wait_for_selector(".toast:has-text('is waiting for a decision again')")
    base.assert_not_reloaded(rita)
    row.refresh_from_db()
    assert row.status == "pending" and row.responded_by is None
    assert rita.errors == []
