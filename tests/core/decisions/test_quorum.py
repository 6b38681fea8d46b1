"""Four-eyes approvals: N distinct approvals of the same args resolve an interrupt."""

from __future__ import annotations

import pytest

from hitl.core import decisions, errors
from hitl.core.models import Approval, AuditEvent, HumanInterrupt, ReviewerGroupPolicy, Run
from tests.conftest import _make_user, decide
from tests.core.decisions.conftest import paused

pytestmark = pytest.mark.django_db


@pytest.fixture
def third_reviewer(reviewers_group):
    return _make_user("tina", reviewers_group)


def resumes(row) -> list[Run]:
    return list(Run.objects.filter(thread_id=row.thread_id, kind="resume"))


def test_the_interrupt_value_asks_for_two_approvals(
    manual_runs, requester, reviewer, second_reviewer
):
    row = paused(manual_runs, requester, approvals={"required": 2})
    assert row.approvals_required == 2

    first = decide(row, reviewer)
    assert first.row.status == "pending" and first.resume_run is None
    assert (first.progress.approvals, first.progress.required) == (1, 2)
    assert resumes(row) == []

    second = decide(row, second_reviewer).row
    assert (second.status, second.response_type, second.responded_by) == (
        "resolved",
        "accept",
        second_reviewer,
    )
    [resume] = resumes(row)
    assert resume.input["resume"][row.interrupt_id] == {"type": "accept", "args": None}
    approvals = list(Approval.objects.filter(interrupt=row).order_by("id"))
    assert [(a.user, a.round) for a in approvals] == [(reviewer, 0), (second_reviewer, 0)]
    kinds = list(
        AuditEvent.objects.filter(interrupt=row).order_by("id").values_list("kind", flat=True)
    )
    assert kinds == [
        "interrupt.created",
        "interrupt.approved",
        "interrupt.approved",
        "interrupt.answered",
    ]


def test_the_group_policy_asks_for_approvals(
    manual_runs, requester, reviewers_group, reviewer, second_reviewer, third_reviewer
):
    ReviewerGroupPolicy.objects.create(group=reviewers_group, approvals_required=3)
    row = paused(manual_runs, requester)
    assert row.approvals_required == 3
    decide(row, reviewer)
    decide(row, second_reviewer)
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    assert decide(row, third_reviewer).row.status == "resolved"


def test_the_interrupt_cannot_lower_the_groups_requirement(manual_runs, requester, reviewers_group):
    ReviewerGroupPolicy.objects.create(group=reviewers_group, approvals_required=2)
    row = paused(manual_runs, requester, approvals=1)
    assert row.approvals_required == 2


def test_one_person_cannot_approve_twice(manual_runs, requester, reviewer):
    row = paused(manual_runs, requester, approvals=2)
    decide(row, reviewer)
    with pytest.raises(errors.Conflict, match="already approved"):
        decide(row, reviewer)
    assert Approval.objects.filter(interrupt=row).count() == 1
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"


def test_an_edit_resets_the_earlier_approvals(
    manual_runs, requester, reviewer, second_reviewer, third_reviewer
):
    row = paused(manual_runs, requester, approvals=2)
    decide(row, reviewer)
    edited = {"to": "cfo@example.com", "subject": "Q3", "copies": 2, "urgent": True}
    after_edit = decide(row, second_reviewer, "edit", {"action": "send_email", "args": edited})
    # The first approval was of other args: only the editor's counts now.
    assert after_edit.row.status == "pending"
    assert after_edit.progress.approvals == 1
    assert (after_edit.row.approval_round, after_edit.row.approval_args) == (1, edited)

    # The first reviewer may approve again: they have not approved these args yet.
    done = decide(row, reviewer).row
    assert (done.status, done.response_type) == ("resolved", "edit")
    assert done.response_args == {"action": "send_email", "args": edited}
    [resume] = resumes(row)
    assert resume.input["resume"][row.interrupt_id] == {
        "type": "edit",
        "args": {"action": "send_email", "args": edited},
    }
    assert third_reviewer  # still had a vote; not needed once the quorum is met


def test_any_reject_ends_it_at_once(manual_runs, requester, reviewer, second_reviewer):
    row = paused(manual_runs, requester, approvals=2)
    decide(row, reviewer)
    ended = decide(row, second_reviewer, "ignore").row
    assert (ended.status, ended.response_type) == ("resolved", "ignore")
    [resume] = resumes(row)
    assert resume.input["resume"][row.interrupt_id]["type"] == "ignore"


def test_a_policy_can_keep_it_open_after_a_reject(
    manual_runs, requester, reviewers_group, reviewer, second_reviewer, third_reviewer
):
    # Only the group's policy can: an interrupt value may make a reject end it, not the
    # opposite (tests/core/decisions/test_four_eyes_stricter_wins.py).
    ReviewerGroupPolicy.objects.create(
        group=reviewers_group, approvals_required=2, reject_ends=False
    )
    row = paused(manual_runs, requester)
    assert decide(row, reviewer, "response", "No, wrong recipient").row.status == "pending"
    assert resumes(row) == []
    decide(row, second_reviewer)
    assert decide(row, third_reviewer).row.status == "resolved"
    vote = AuditEvent.objects.filter(interrupt=row, kind="interrupt.approved").first()
    assert vote.data["vote"] == "reject"


def test_the_requester_cannot_approve_their_own_threads_interrupt(
    manual_runs, reviewers_group, reviewer
):
    requester = _make_user("reggie", reviewers_group)
    row = paused(manual_runs, requester, approvals=2)
    with pytest.raises(errors.Forbidden, match="requested this thread"):
        decide(row, requester)
    assert not Approval.objects.filter(interrupt=row).exists()
    # Rejecting their own request stays possible.
    assert decide(row, requester, "ignore").row.status == "resolved"
    assert reviewer


def test_a_policy_may_allow_self_approval(manual_runs, reviewers_group, reviewer):
    ReviewerGroupPolicy.objects.create(
        group=reviewers_group, approvals_required=2, allow_self_approval=True
    )
    requester = _make_user("reggie", reviewers_group)
    row = paused(manual_runs, requester)
    assert decide(row, requester).row.status == "pending"
    assert decide(row, reviewer).row.status == "resolved"


def test_approvals_must_come_from_the_named_sub_groups(
    manual_runs, requester, reviewers_group, finance_group, reviewer
):
    policy = ReviewerGroupPolicy.objects.create(group=reviewers_group, approvals_required=2)
    policy.approval_groups.add(finance_group)
    row = paused(manual_runs, requester)
    with pytest.raises(errors.Forbidden, match="must come from: finance"):
        decide(row, reviewer)
    controller = _make_user("carl", reviewers_group, finance_group)
    assert decide(row, controller).row.status == "pending"


def test_agent_inbox_and_langgraph_still_see_one_pending_interrupt(
    manual_runs, requester, reviewer, api_for
):
    row = paused(manual_runs, requester, approvals=2)
    decide(row, reviewer)
    state = api_for(requester).get(f"/langgraph/threads/{row.thread_id}/state")
    assert state.status_code == 200
    [task] = [t for t in state.json()["tasks"] if t["interrupts"]]
    assert len(task["interrupts"]) == 1
    assert HumanInterrupt.objects.filter(thread_id=row.thread_id).pending().count() == 1


def test_undoing_the_deciding_approval_takes_it_back(
    manual_runs, requester, reviewer, second_reviewer, settings
):
    row = paused(manual_runs, requester, approvals=2)
    decide(row, reviewer)
    decisions.interrupt_resolve(
        interrupt_id=row.pk, user=second_reviewer, response_type="accept", grace=30
    )
    decisions.interrupt_undo(interrupt_id=row.pk, user=second_reviewer)
    row.refresh_from_db()
    assert row.status == "pending"
    assert list(
        Approval.objects.filter(interrupt=row).values_list("user__username", flat=True)
    ) == ["rita"]
    assert decide(row, second_reviewer).row.status == "resolved"


@pytest.mark.parametrize("asked", ["two", {"required": 0}, {"required": -3}, None, [2], True])
def test_a_malformed_approvals_field_leaves_a_single_decision(manual_runs, requester, asked):
    row = paused(manual_runs, requester, approvals=asked)
    assert row.approvals_required == 1


def test_an_absurd_requirement_is_capped(manual_runs, requester):
    assert paused(manual_runs, requester, approvals=10_000).approvals_required == 20
