"""Decisions for the analytics page's tests (tests/ops/test_rule_analytics.py and the
phone and desk views in tests/review/test_browser_trust_views.py): the rules they use,
and people's decisions that took a known time."""

from __future__ import annotations

from datetime import timedelta

from hitl.core import decisions
from hitl.core.models import DecisionRule, HumanInterrupt
from tests.review.conftest import human_interrupt, open_interrupts


def never_delete_rule() -> DecisionRule:
    """A live rule that ignores every delete_*: it decides such items as they open."""
    return DecisionRule.objects.create(
        name="never-delete", outcome="ignore", action="delete_*", mode="live"
    )


def internal_mail_rule(name: str = "internal-mail") -> DecisionRule:
    """A dry-run rule that would accept mail to @ourcompany.com: an opinion, no decision."""
    return DecisionRule.objects.create(
        name=name,
        outcome="accept",
        action="send_email",
        condition='args.to.endsWith("@ourcompany.com")',
        mode="dry_run",
    )


def people_took_four_and_eight_minutes(*, requester, reviewer) -> list[HumanInterrupt]:
    """Two send_email items rita accepted after 4 and 8 minutes, and a delete_file the
    never-delete rule decided at once; the rows in that order."""
    never_delete_rule()
    _, rows = open_interrupts(
        user=requester,
        values=[human_interrupt("send_email", {"n": n}) for n in range(2)]
        + [human_interrupt("delete_file", {"path": "/x"})],
    )
    for row, minutes in zip(rows[:2], (4, 8), strict=True):
        HumanInterrupt.objects.filter(pk=row.pk).update(
            created_at=row.created_at - timedelta(minutes=minutes)
        )
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    return rows
