"""Forking from the thread page: who may, and what bad input gets (no worker needed)."""

from __future__ import annotations

import re

from hitl.core.history import timetravel
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from tests.review.conftest import checkpoints


def _done_thread(requester, group) -> Thread:
    return Thread.objects.create(
        graph="approval",
        title="Done",
        requester=requester,
        reviewer_group=group,
        status=Thread.Status.DONE,
    )


def test_only_who_may_run_a_thread_may_fork_it(
    client_for, reviewer, second_reviewer, outsider, reviewers_group
):
    thread = _done_thread(reviewer, reviewers_group)
    url = f"/threads/{thread.pk}/fork/"
    page = client_for(second_reviewer).get(f"/threads/{thread.pk}/")
    assert page.status_code == 200 and b"btn-fork" not in page.content
    # May view, may not change: 403 on the thread page, with the reason.
    answer = client_for(second_reviewer).post(url, {"checkpoint_id": "x"})
    assert answer.status_code == 403 and b"Only the thread&#x27;s requester" in answer.content
    # May not even view: 404, as every thread page answers (no redirect, no oracle).
    assert client_for(outsider).post(url, {"checkpoint_id": "x"}).status_code == 404
    assert not Run.objects.exists()
    assert not AuditEvent.objects.filter(kind="thread.forked").exists()


def test_a_fork_from_an_unknown_step_or_with_bad_json_is_refused(
    client_for, reviewer, reviewers_group
):
    thread = _done_thread(reviewer, reviewers_group)
    url = f"/threads/{thread.pk}/fork/"
    client = client_for(reviewer)
    for data, says in (
        ({"checkpoint_id": "1f0-nope"}, b"This thread has no such step."),
        ({"checkpoint_id": ""}, b"Choose a step of this thread&#x27;s history."),
        ({"checkpoint_id": "1f0-nope", "values": "{"}, b"not valid JSON"),
        ({"checkpoint_id": "1f0-nope", "values": "x" * 70000}, b"too large"),
    ):
        answer = client.post(url, data, follow=True)
        assert answer.status_code == 200 and says in answer.content, data
    assert not Run.objects.exists()
    assert Thread.objects.get(pk=thread.pk).status == "done"


def _text(html: str) -> str:
    """The words of an HTML fragment, as a browser would show them on one line."""
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def _demo_done(requester, reviewer, manual_runs) -> Thread:
    """The demo story run in this process to its end: quarter answered, mail accepted.

    Its callers commit (transactional_db): the tool's step writes from the run's own
    thread, which on SQLite's shared in-memory test database would meet the test's open
    transaction as a locked table."""
    from hitl.core import decisions, runs

    run = runs.run_start(graph="demo", input={}, user=requester, title="report")
    manual_runs(run)
    while pending := list(HumanInterrupt.objects.filter(thread=run.thread, status="pending")):
        for row in pending:
            kind = "response" if row.action == "ask_clarification" else "accept"
            decisions.interrupt_resolve(
                interrupt_id=row.pk,
                user=reviewer,
                response_type=kind,
                args="Q3 2025" if kind == "response" else None,
            )
        manual_runs(Run.objects.filter(thread=run.thread).order_by("-created_at").first())
    return Thread.objects.get(pk=run.thread_id)


def test_the_thread_page_loads_its_history_only_when_asked_a_page_at_a_time(
    manual_runs, client_for, requester, reviewer, transactional_db
):
    thread = _demo_done(requester, reviewer, manual_runs)
    client = client_for(requester)
    page = client.get(f"/threads/{thread.pk}/").content.decode()
    shell = page[page.index('id="section-history"') : page.index('id="section-audit"')]
    # The page embeds the section, not its steps nor their states.
    assert 'class="checkpoint' not in shell and "finance-team@example.com" not in shell
    assert len(shell) < 1500
    url = f"/threads/{thread.pk}/history/"
    first = client.get(url, {"partial": "1"}).content.decode()
    assert first.count('<li class="checkpoint') == 10
    assert "tools ran send_email (to: finance-team@example.com" in _text(first)
    assert "accepted by rita" in _text(first)
    # States load one by one; the fragment carries none.
    assert '"messages"' not in first and "data-state-src" in first
    seen = first.count('<li class="checkpoint')
    before = first.split("before=")[-1].split('"')[0]
    while before:
        more = client.get(url, {"partial": "1", "before": before}).content.decode()
        seen += more.count('<li class="checkpoint')
        before = more.split("before=")[-1].split('"')[0] if "data-more" in more else ""
    assert "Run started" in _text(more)
    assert seen == len(checkpoints(thread))
    checkpoint = checkpoints(thread, limit=1)[0]["checkpoint_id"]
    state = client.get(url, {"partial": "1", "state": checkpoint}).content.decode()
    assert "final_result" in state and "Sent the Q3 2025 sales report" in state
    # Without script, the history is a page of its own, states included.
    whole = client.get(url).content.decode()
    assert "<h1>History</h1>" in whole and "Sent the Q3 2025 sales report" in whole


def test_history_requests_for_unknown_steps_or_other_peoples_threads_are_refused(
    client_for, reviewer, outsider, reviewers_group
):
    thread = _done_thread(reviewer, reviewers_group)
    url = f"/threads/{thread.pk}/history/"
    client = client_for(reviewer)
    assert client.get(url, {"partial": "1", "before": "x" * 65}).status_code == 400
    assert client.get(url, {"partial": "1", "state": "x" * 65}).status_code == 400
    answer = client.get(url, {"partial": "1", "state": "1f0-nope"})
    assert answer.status_code == 404 and b"This thread has no such step." in answer.content
    assert client_for(outsider).get(url, {"partial": "1"}).status_code == 404


def test_history_names_who_forked_and_who_edited_the_state_and_on_which_branch(
    manual_runs, client_for, requester, reviewer, transactional_db
):
    from hitl.core import decisions

    thread = _demo_done(requester, reviewer, manual_runs)
    (before_send,) = [cp for cp in checkpoints(thread) if cp["step"] == 12 and cp["next"]]
    fork = timetravel.thread_fork(
        thread=thread, user=requester, checkpoint_id=before_send["checkpoint_id"]
    )
    assert manual_runs(fork) == "interrupted"
    row = HumanInterrupt.objects.get(thread=thread, run=fork)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="ignore")
    manual_runs(Run.objects.filter(thread=thread).order_by("-created_at").first())
    thread.refresh_from_db()
    again = timetravel.thread_fork(
        thread=thread,
        user=requester,
        checkpoint_id=before_send["checkpoint_id"],
        values={"final_result": None},
    )
    assert manual_runs(again) == "interrupted"
    page = client_for(requester).get(f"/threads/{thread.pk}/history/?partial=1").content.decode()
    told = [_text(item.split(">", 1)[1]) for item in page.split("<li ")[1:]]
    assert "fork 2 Forked by quinn (fork 2, from step 12) · tools asks to run send_email" in told[0]
    assert "fork 2 State edited by quinn: final_result" in told[1]
    forked = [t for t in told if "Forked by quinn (fork 1, from step 12)" in t]
    assert len(forked) == 1 and "fork 1" in forked[0]
    # Skipped: the tool did not run, and the page says who skipped it.
    skipped = [t for t in told if "tools did not run send_email" in t]
    assert skipped and "skipped by rita" in skipped[0]


def test_the_history_of_an_edited_tool_call_shows_the_args_it_ran_with_and_the_change(
    manual_runs, client_for, requester, reviewer, transactional_db
):
    from hitl.core import decisions, runs

    run = runs.run_start(graph="demo", input={}, user=requester, title="report")
    manual_runs(run)
    (ask,) = HumanInterrupt.objects.filter(thread=run.thread, status="pending")
    decisions.interrupt_resolve(
        interrupt_id=ask.pk, user=reviewer, response_type="response", args="Q3 2025"
    )
    manual_runs(Run.objects.filter(thread=run.thread).order_by("-created_at").first())
    (mail,) = HumanInterrupt.objects.filter(thread=run.thread, status="pending")
    assert mail.args["to"] == "finance-team@example.com"
    decisions.interrupt_resolve(
        interrupt_id=mail.pk,
        user=reviewer,
        response_type="edit",
        args={"action": "send_email", "args": {**mail.args, "to": "cfo@example.com"}},
    )
    manual_runs(Run.objects.filter(thread=run.thread).order_by("-created_at").first())
    told = _text(client_for(requester).get(f"/threads/{run.thread_id}/history/").content.decode())
    # The step that ran says the args it ran with, and what the reviewer changed.
    assert "tools ran send_email (to: cfo@example.com, subject: Sales report Q3 2025" in told
    assert "edited by rita: to finance-team@example.com → cfo@example.com" in told
    assert "ran send_email (to: finance-team@example.com" not in told
