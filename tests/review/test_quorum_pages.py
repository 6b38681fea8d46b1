"""Four-eyes on the reviewer pages: progress, edited args, the decision message."""

from __future__ import annotations

import pytest

from hitl.core.models import HumanInterrupt
from tests.review.conftest import human_interrupt

pytestmark = pytest.mark.django_db


def test_the_thread_page_and_inbox_show_progress_and_the_edited_args(
    paused, client_for, requester, reviewer, second_reviewer
):
    thread, [row] = paused(
        user=requester,
        values=[human_interrupt("send_email", {"to": "a@b.c", "copies": 1}, approvals=2)],
    )
    rita = client_for(reviewer)
    inbox = rita.get("/").content.decode()
    assert "0 of 2 approvals" in inbox

    response = rita.post(f"/interrupts/{row.pk}/decide/", {"type": "accept"}, follow=True)
    page = response.content.decode()
    assert "Approval recorded (1 of 2 approvals)" in page
    assert "1 of 2 approvals" in page and "approved by rita" in page
    assert "1 of 2 approvals" in rita.get("/").content.decode()

    sam = client_for(second_reviewer)
    sam.post(
        f"/interrupts/{row.pk}/decide/",
        {"type": "edit", "arg_0": "cfo@b.c", "arg_1": "3"},
    )
    row.refresh_from_db()
    assert row.approval_args == {"to": "cfo@b.c", "copies": 3}, row.approval_args
    page = rita.get(f"/threads/{thread.pk}/").content.decode()
    assert "Edited args under approval" in page and "approved by sam" in page
    # The form offers the args under approval, so accepting approves exactly those.
    assert 'value="cfo@b.c"' in page

    again = rita.post(
        f"/interrupts/{row.pk}/decide/", {"type": "accept"}, HTTP_ACCEPT="application/json"
    )
    assert again.status_code == 200, again.content
    row = HumanInterrupt.objects.get(pk=row.pk)
    assert (row.status, row.response_type) == ("resolved", "edit")
    assert row.response_args == {"action": "send_email", "args": {"to": "cfo@b.c", "copies": 3}}


def test_a_second_approval_by_the_same_reviewer_is_refused_as_json(
    paused, client_for, requester, reviewer
):
    _, [row] = paused(user=requester, values=[human_interrupt(approvals=2)])
    rita = client_for(reviewer)
    first = rita.post(
        f"/interrupts/{row.pk}/decide/", {"type": "accept"}, HTTP_ACCEPT="application/json"
    )
    assert first.json()["message"].startswith("Approval recorded (1 of 2 approvals)")
    second = rita.post(
        f"/interrupts/{row.pk}/decide/", {"type": "accept"}, HTTP_ACCEPT="application/json"
    )
    assert second.status_code == 409
    assert "already approved" in second.json()["error"]


def test_approving_from_a_page_shown_before_an_edit_is_refused(
    paused, client_for, requester, reviewer, second_reviewer
):
    thread, [row] = paused(
        user=requester,
        values=[human_interrupt("send_email", {"to": "a@b.c", "copies": 1}, approvals=2)],
    )
    rita = client_for(reviewer)
    page = rita.get(f"/threads/{thread.pk}/").content.decode()
    assert 'name="approval_round" value="0"' in page
    client_for(second_reviewer).post(
        f"/interrupts/{row.pk}/decide/",
        {"type": "edit", "arg_0": "cfo@b.c", "arg_1": "3", "approval_round": "0"},
    )
    # Rita's page still shows the old args: her accept must not approve the new ones.
    stale = rita.post(
        f"/interrupts/{row.pk}/decide/",
        {"type": "accept", "approval_round": "0"},
        HTTP_ACCEPT="application/json",
    )
    assert stale.status_code == 409
    assert "review the new args" in stale.json()["error"]
    row.refresh_from_db()
    assert (row.status, row.approvals.filter(round=1).count()) == ("pending", 1)
    fresh = rita.post(
        f"/interrupts/{row.pk}/decide/",
        {"type": "accept", "approval_round": "1"},
        HTTP_ACCEPT="application/json",
    )
    assert fresh.status_code == 200
    assert HumanInterrupt.objects.get(pk=row.pk).status == "resolved"
