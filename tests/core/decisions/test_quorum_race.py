"""Twenty reviewers racing on a 2-of-M item on Postgres: two approvals, one resume."""

from __future__ import annotations

from collections import Counter

import pytest

from hitl.core import runs
from hitl.core.models import Approval, HumanInterrupt, Run, Thread
from tests.core.decisions.conftest import race, reviewers_with_tokens

pytestmark = pytest.mark.postgres


@pytest.fixture
def twenty(transactional_db, reviewers_group):
    return reviewers_with_tokens(20, "eyes", reviewers_group)


def test_twenty_reviewers_racing_on_two_of_m_resume_exactly_once(manual_runs, requester, twenty):
    run = runs.run_start(graph="approval", input={"approvals": 2}, user=requester)
    assert manual_runs(run) == "interrupted"
    [row] = HumanInterrupt.objects.filter(run=run)
    path = f"/api/v1/interrupts/{row.pk}/decision"

    results = race([(key, path, {"type": "accept"}) for key in twenty.values()])

    # One approval recorded, one that completed the quorum, eighteen too late.
    statuses = Counter(status for _, status, _ in results)
    assert statuses == {200: 2, 409: 18}
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("resolved", "accept")
    approvers = set(Approval.objects.filter(interrupt=row).values_list("user__username", flat=True))
    assert len(approvers) == 2 and row.responded_by.username in approvers
    late = {body["detail"] for _, status, body in results if status == 409}
    assert late == {f"Already answered by {row.responded_by.username}."}
    [resume] = Run.objects.filter(thread=row.thread, kind="resume")
    assert resume.input == {"resume": {row.interrupt_id: {"type": "accept", "args": None}}}
    assert manual_runs(resume) == "success"
    assert Thread.objects.get(pk=row.thread_id).status == "done"
