"""A failed or cancelled run on the thread page: a banner in words, retry and new run."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from hitl.core import runs
from hitl.core.models import AuditEvent, Run
from hitl.core.worker import lease
from tests.review.conftest import WORKER

TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/tests/graphs.py", line 191, in _maybe_fail\n'
    '    raise RuntimeError("the tool exploded")\n'
    "RuntimeError: the tool exploded\n"
    "During task with name 'work' and id '1f2e'\n"
)


@pytest.fixture
def failed_thread(settings, requester):
    settings.HITL_EXECUTOR = "manual"
    run = runs.run_start(graph="approval", input={"request": "q3"}, user=requester, title="F")
    lease.run_lease_take(run_id=run.pk, worker=WORKER)
    lease.run_fail(run_id=run.pk, worker=WORKER, error=TRACE)
    run.thread.refresh_from_db()
    return run.thread


def test_requester_sees_the_error_in_words_and_may_start_a_new_run(
    failed_thread, client_for, requester
):
    html = client_for(requester).get(f"/threads/{failed_thread.pk}/").content.decode()
    assert 'id="run-failed"' in html
    assert "RuntimeError: the tool exploded" in html
    assert "Full traceback" not in html and "graphs.py" not in html
    assert "Start a new run" in html and "Retry from the last step" not in html


def test_staff_see_the_folded_traceback_and_may_retry(failed_thread, client_for, admin_user):
    html = client_for(admin_user).get(f"/threads/{failed_thread.pk}/").content.decode()
    assert '<details class="run-error"><summary>Full traceback' in html
    assert "Retry from the last step" in html and "Start a new run" in html


def test_a_reviewer_who_may_not_run_it_is_told_who_can(
    failed_thread, client_for, reviewer, review_all_user
):
    html = client_for(review_all_user).get(f"/threads/{failed_thread.pk}/").content.decode()
    assert "RuntimeError: the tool exploded" in html
    assert "Its requester or an admin can run it again." in html
    assert "Start a new run" not in html


def test_retry_requeues_the_failed_run_for_staff_only(
    failed_thread, client_for, admin_user, requester
):
    run = failed_thread.runs.get()
    refused = client_for(requester).post(f"/threads/{failed_thread.pk}/retry/", follow=True)
    assert (
        "Only admins with the hitl.change_run permission can do this." in refused.content.decode()
    )
    assert Run.objects.get(pk=run.pk).status == "error"

    response = client_for(admin_user).post(f"/threads/{failed_thread.pk}/retry/", follow=True)
    assert "Retrying the failed run" in response.content.decode()
    run.refresh_from_db()
    failed_thread.refresh_from_db()
    assert (run.status, failed_thread.status) == ("queued", "busy")
    assert AuditEvent.objects.filter(thread=failed_thread, kind="run.retried").exists()
    assert 'id="run-failed"' not in response.content.decode()


def test_a_new_run_reuses_the_start_input_and_is_refused_to_others(
    failed_thread, client_for, requester, review_all_user
):
    refused = client_for(review_all_user).post(f"/threads/{failed_thread.pk}/rerun/", follow=True)
    assert "Only the thread&#x27;s requester" in refused.content.decode()
    assert failed_thread.runs.count() == 1

    response = client_for(requester).post(f"/threads/{failed_thread.pk}/rerun/", follow=True)
    assert "A new run started" in response.content.decode()
    latest = failed_thread.runs.order_by("-created_at").first()
    assert (latest.kind, latest.status, latest.input) == ("start", "queued", {"request": "q3"})


def test_outsiders_get_404_from_retry_and_rerun(failed_thread, client_for, outsider):
    client = client_for(outsider)
    assert client.post(f"/threads/{failed_thread.pk}/retry/").status_code == 404
    assert client.post(f"/threads/{failed_thread.pk}/rerun/").status_code == 404
    assert client.get(f"/threads/{failed_thread.pk}/rerun/").status_code == 405
    assert failed_thread.runs.count() == 1


def test_a_cancelled_thread_says_cancelled_not_idle(paused, client_for, requester):
    from tests.review.conftest import human_interrupt

    thread, _ = paused(user=requester, values=[human_interrupt()])
    runs.thread_cancel(thread=thread, user=requester)
    html = client_for(requester).get(f"/threads/{thread.pk}/").content.decode()
    assert 'class="status status-cancelled"' in html
    assert 'id="run-cancelled"' in html and "pending decisions were withdrawn" in html
    assert "Start a new run" in html


def _words(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_a_failed_runs_error_is_said_once_on_its_page(
    failed_thread, client_for, requester, admin_user
):
    page = client_for(requester).get(f"/threads/{failed_thread.pk}/").content.decode()
    assert _words(page).count("the tool exploded") == 1
    banner = page[page.index('id="run-failed"') : page.index('id="interrupts"')]
    assert "RuntimeError: the tool exploded" in banner
    # The runs list and the audit trail point to the banner instead of repeating it.
    assert 'href="#run-failed">Its error is shown above' in page
    assert 'href="#run-failed">the error shown above' in page
    # Staff: the headline and its folded traceback, both in the banner, nowhere else.
    staff = client_for(admin_user).get(f"/threads/{failed_thread.pk}/").content.decode()
    after_banner = staff[staff.index('id="interrupts"') :]
    assert "the tool exploded" not in after_banner and "Traceback (admins only)" not in staff


def test_the_error_tab_row_says_the_error_and_the_default_group(
    failed_thread, client_for, requester
):
    html = client_for(requester).get("/", {"tab": "error"}).content.decode()
    row = html[html.index(f'id="row-{failed_thread.pk}"') :]
    row = _words(row[: row.index("</tr>")])
    assert "RuntimeError: the tool exploded" in row
    assert "reviewers" in row and "default" not in row


def test_a_retried_run_counts_its_attempts_on_and_times_only_the_retry(
    failed_thread, client_for, admin_user
):
    run = failed_thread.runs.get()
    # It failed an hour ago, and sat failed since.
    Run.objects.filter(pk=run.pk).update(
        started_at=run.finished_at - timedelta(hours=1, seconds=5),
        finished_at=run.finished_at - timedelta(hours=1),
    )
    client_for(admin_user).post(f"/threads/{failed_thread.pk}/retry/")
    taken, _ = lease.run_lease_take(run_id=run.pk, worker=WORKER)
    assert taken is not None and taken.first_lease is False  # continues from its checkpoints
    lease.run_fail(run_id=run.pk, worker=WORKER, error=TRACE)
    run.refresh_from_db()
    assert run.attempts == 2 and run.duration < timedelta(minutes=1)
    page = _words(client_for(admin_user).get(f"/threads/{failed_thread.pk}/").content.decode())
    assert "start, attempt 2" in page and "attempt 1" in page
    assert "2 attempts" in page and " min" not in page
