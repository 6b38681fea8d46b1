"""Forking from the thread page: who may, and what bad input gets (no worker needed)."""

from __future__ import annotations

from hitl.core.models import AuditEvent, Run, Thread


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
