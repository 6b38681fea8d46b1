"""Four-eyes: of the group's policy and the interrupt value, the stricter wins, field by
field. An interrupt can raise `required`, narrow `from_groups` to a subset, forbid
self-approval and make a reject end the item; never the opposite."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from hitl.core import errors
from hitl.core.decisions import quorum
from hitl.core.models import Approval, HumanInterrupt, ReviewerGroupPolicy
from tests.conftest import _make_user, decide
from tests.core.decisions.conftest import paused

pytestmark = pytest.mark.django_db


@pytest.fixture
def legal_group(db):
    return Group.objects.get_or_create(name="legal")[0]


def policy_for(group, groups=(), **fields) -> ReviewerGroupPolicy:
    fields.setdefault("approvals_required", 2)
    policy = ReviewerGroupPolicy.objects.create(group=group, **fields)
    policy.approval_groups.add(*groups)
    return policy


def effective(group, approvals) -> tuple[int, dict]:
    settings = quorum.approval_settings({"approvals": approvals}, 0, group)
    return settings["approvals_required"], settings["approval_policy"]


# --- required -------------------------------------------------------------------------


def test_an_interrupt_can_raise_the_required_approvals(reviewers_group):
    policy_for(reviewers_group)
    assert effective(reviewers_group, {"required": 3})[0] == 3


def test_an_interrupt_cannot_lower_the_required_approvals(reviewers_group):
    policy_for(reviewers_group, approvals_required=3)
    assert effective(reviewers_group, {"required": 2})[0] == 3
    assert effective(reviewers_group, 1)[0] == 3


# --- from_groups ----------------------------------------------------------------------


def test_an_interrupt_can_narrow_the_approval_groups_to_a_subset(
    reviewers_group, finance_group, legal_group
):
    policy_for(reviewers_group, [finance_group, legal_group])
    _, snapshot = effective(reviewers_group, {"required": 2, "from_groups": ["finance"]})
    assert snapshot["from_groups"] == ["finance"]


def test_an_interrupt_can_name_approval_groups_where_the_policy_names_none(reviewers_group):
    policy_for(reviewers_group)
    _, snapshot = effective(reviewers_group, {"required": 2, "from_groups": ["finance"]})
    assert snapshot["from_groups"] == ["finance"]
    _, without_policy = effective(None, {"required": 2, "from_groups": ["finance"]})
    assert without_policy["from_groups"] == ["finance"]


@pytest.mark.parametrize(
    "asked", [["reviewers"], ["finance", "reviewers"], [], "reviewers", ["legal", 3]]
)
def test_an_interrupt_cannot_widen_the_approval_groups(
    reviewers_group, finance_group, legal_group, asked
):
    policy_for(reviewers_group, [finance_group])
    _, snapshot = effective(reviewers_group, {"required": 2, "from_groups": asked})
    assert snapshot["from_groups"] == ["finance"]


def test_the_policys_approval_groups_hold_when_the_interrupt_raises_the_requirement(
    reviewers_group, finance_group
):
    policy_for(reviewers_group, [finance_group], approvals_required=1)
    required, snapshot = effective(reviewers_group, {"required": 2})
    assert (required, snapshot["from_groups"]) == (2, ["finance"])


# --- allow_self_approval --------------------------------------------------------------


def test_an_interrupt_can_forbid_self_approval(reviewers_group):
    policy_for(reviewers_group, allow_self_approval=True)
    _, snapshot = effective(reviewers_group, {"required": 2, "allow_self_approval": False})
    assert snapshot["allow_self_approval"] is False


@pytest.mark.parametrize("with_policy", [True, False])
def test_an_interrupt_cannot_allow_self_approval(reviewers_group, with_policy):
    if with_policy:
        policy_for(reviewers_group, allow_self_approval=False)
    _, snapshot = effective(reviewers_group, {"required": 2, "allow_self_approval": True})
    assert snapshot["allow_self_approval"] is False


# --- reject_ends ----------------------------------------------------------------------


def test_an_interrupt_can_make_a_reject_end_the_item(reviewers_group):
    policy_for(reviewers_group, reject_ends=False)
    _, snapshot = effective(reviewers_group, {"required": 2, "reject_ends": True})
    assert snapshot["reject_ends"] is True


@pytest.mark.parametrize("with_policy", [True, False])
def test_an_interrupt_cannot_keep_the_item_open_after_a_reject(reviewers_group, with_policy):
    if with_policy:
        policy_for(reviewers_group, reject_ends=True)
    _, snapshot = effective(reviewers_group, {"required": 2, "reject_ends": False})
    assert snapshot["reject_ends"] is True


def test_without_a_value_the_policy_stands(reviewers_group, finance_group):
    policy_for(reviewers_group, [finance_group], allow_self_approval=True, reject_ends=False)
    required, snapshot = effective(reviewers_group, None)
    assert required == 2
    assert snapshot["from_groups"] == ["finance"]
    assert (snapshot["allow_self_approval"], snapshot["reject_ends"]) == (True, False)


# --- end to end: the cases ----------------------------------------------------


@pytest.fixture
def finance_policy(reviewers_group, finance_group):
    """Two approvals from finance, no self-approval (reject ends: the default)."""
    return policy_for(reviewers_group, [finance_group])


def test_a_loosening_value_does_not_let_the_requester_approve(
    manual_runs, reviewers_group, finance_group, finance_policy
):
    requester = _make_user("reggie", reviewers_group, finance_group)
    row = paused(manual_runs, requester, approvals={"required": 2, "allow_self_approval": True})
    with pytest.raises(errors.Forbidden, match="requested this thread"):
        decide(row, requester)
    assert not Approval.objects.filter(interrupt=row).exists()


def test_a_widening_value_does_not_let_a_non_finance_reviewer_approve(
    manual_runs, requester, reviewer, finance_policy
):
    row = paused(manual_runs, requester, approvals={"required": 2, "from_groups": ["reviewers"]})
    with pytest.raises(errors.Forbidden, match="must come from: finance"):
        decide(row, reviewer)
    assert not Approval.objects.filter(interrupt=row).exists()


def test_a_value_cannot_keep_a_rejected_item_open(
    manual_runs, requester, reviewers_group, finance_group, finance_policy
):
    controller = _make_user("carl", reviewers_group, finance_group)
    row = paused(manual_runs, requester, approvals={"required": 2, "reject_ends": False})
    ended = decide(row, controller, "ignore").row
    assert (ended.status, ended.response_type) == ("resolved", "ignore")
    assert HumanInterrupt.objects.get(pk=row.pk).status == "resolved"
