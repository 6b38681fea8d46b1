"""Groups, policies and rules are read once per process, and changes reach the next pause."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hitl.api.langgraph import services as lg_services
from hitl.core.models import DecisionRule, HumanInterrupt, ReviewerGroupPolicy

pytestmark = pytest.mark.django_db

CONFIG_TABLES = ("auth_group", "hitl_reviewergrouppolicy", "hitl_decisionrule")


def pause(manual_runs, requester) -> tuple[HumanInterrupt, list[str]]:
    """Run the approval graph to its pause; its interrupt row and the SQL it took."""
    thread = lg_services.thread_create(user=requester)
    run = lg_services.run_create(user=requester, assistant_id="approval", thread=thread, input={})
    with CaptureQueriesContext(connection) as captured:
        assert manual_runs(run) == "interrupted"
    row = HumanInterrupt.objects.get(thread=thread)
    return row, [q["sql"] for q in captured.captured_queries]


def config_reads(sql: list[str]) -> list[str]:
    return [s for s in sql if s.startswith("SELECT") and any(f'"{t}"' in s for t in CONFIG_TABLES)]


def test_a_second_pause_reads_no_groups_policies_or_rules(manual_runs, requester, reviewers_group):
    _, first = pause(manual_runs, requester)
    _, second = pause(manual_runs, requester)
    assert len(config_reads(first)) == 3  # the default group, its policy, the rules
    assert config_reads(second) == []
    assert len(second) == len(first) - 3


def test_a_policy_saved_after_a_pause_applies_to_the_next_one(
    manual_runs, requester, reviewers_group
):
    before, _ = pause(manual_runs, requester)
    ReviewerGroupPolicy.objects.create(group=reviewers_group, expire_after_seconds=600)
    after, _ = pause(manual_runs, requester)
    assert before.expires_at is None
    assert after.expires_at is not None
    assert 590 <= (after.expires_at - after.created_at).total_seconds() <= 610


def test_rules_switched_on_and_off_apply_from_the_next_pause(
    manual_runs, requester, reviewers_group
):
    untouched, _ = pause(manual_runs, requester)
    rule = DecisionRule.objects.create(
        name="auto", outcome="accept", mode=DecisionRule.Mode.LIVE, action="*"
    )
    decided, _ = pause(manual_runs, requester)
    rule.mode = DecisionRule.Mode.OFF
    rule.save()
    left_alone, _ = pause(manual_runs, requester)
    assert untouched.status == HumanInterrupt.Status.PENDING
    assert (decided.status, decided.decided_by_rule) == ("resolved", "auto v1")
    assert left_alone.status == HumanInterrupt.Status.PENDING


def test_a_group_renamed_away_is_not_routed_to_from_the_cache(
    manual_runs, requester, reviewers_group
):
    first, _ = pause(manual_runs, requester)
    reviewers_group.name = "former-reviewers"
    reviewers_group.save()
    second, _ = pause(manual_runs, requester)
    assert first.reviewer_group_id == reviewers_group.pk
    # The default group is looked up by name again: a new "reviewers" group is made.
    assert second.reviewer_group_id != reviewers_group.pk
    assert second.reviewer_group.name == "reviewers"
