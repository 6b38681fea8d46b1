"""The analytics page: automatic vs human decisions per rule and group, agreement, time saved."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from hitl.core import decisions
from hitl.core.models import DecisionRule, HumanInterrupt
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = pytest.mark.django_db


def test_analytics_shows_rules_agreement_and_time_saved(client, admin_user, requester, reviewer):
    DecisionRule.objects.create(
        name="never-delete", outcome="ignore", action="delete_*", mode="live"
    )
    DecisionRule.objects.create(
        name="internal-mail",
        outcome="accept",
        action="send_email",
        condition='args.to.endsWith("@ourcompany.com")',
        mode="dry_run",
    )
    _, [mail, delete] = open_interrupts(
        user=requester,
        values=[
            human_interrupt("send_email", {"to": "ann@ourcompany.com"}),
            human_interrupt("delete_file", {"path": "/x"}),
        ],
    )
    # A person took ten minutes over the mail.
    HumanInterrupt.objects.filter(pk=mail.pk).update(
        created_at=mail.created_at - timedelta(minutes=10)
    )
    decisions.interrupt_resolve(interrupt_id=mail.pk, user=reviewer, response_type="accept")

    client.force_login(admin_user)
    html = client.get("/analytics/", {"days": "7"}).content.decode()
    groups = html[html.index('<table id="automation-groups"') :]
    assert re.search(r"<td>reviewers</td><td>1</td><td>1</td>", groups)
    rules = html[html.index('<table id="automation-rules"') :]
    assert re.search(
        r"<td>never-delete v1</td><td>live \(decides\)</td><td>ignore</td><td>1", rules
    )
    assert re.search(r"<td>internal-mail v1</td>.*?<td>1 of 1 \(100%\)</td>", rules)
    saved = html[html.index('id="time-saved"') :]
    assert "Rules decided <b>1</b> item in this period" in saved
    assert "median of 10.0m" in saved and "about <b>10.0m</b>" in saved
    # The rule's instant decision does not pull the people's latency down.
    latency = html[html.index('<svg id="latency-chart"') :]
    assert "p50 10.0m" in latency and "1 decision<" in latency
    assert delete.pk


def test_an_undone_answer_is_no_decision_and_the_counts_add_up(
    client, admin_user, requester, reviewer, second_reviewer
):
    """Issue 28: rita's accept, undone, then sam's: one human decision, not two; the rule's
    accept stays apart from people's, and both sections count the same decisions."""
    DecisionRule.objects.create(
        name="never-delete", outcome="ignore", action="delete_*", mode="live"
    )
    _, [mail, delete] = open_interrupts(
        user=requester,
        values=[human_interrupt("send_email"), human_interrupt("delete_file", {"path": "/x"})],
    )
    decisions.interrupt_resolve(
        interrupt_id=mail.pk, user=reviewer, response_type="accept", grace=300
    )
    decisions.interrupt_undo(interrupt_id=mail.pk, user=reviewer)
    decisions.interrupt_resolve(interrupt_id=mail.pk, user=second_reviewer, response_type="accept")
    assert HumanInterrupt.objects.get(pk=delete.pk).decided_by_rule

    client.force_login(admin_user)
    html = client.get("/analytics/", {"days": "7"}).content.decode()
    groups = html[html.index('<table id="automation-groups"') :]
    # group, automatic, human
    assert re.search(r"<td>reviewers</td><td>1</td><td>1</td>", groups), groups[:600]
    counts = html[html.index("The numbers as a table") :]
    assert re.search(r"accept 1\b", counts) and re.search(r"rule 1\b", counts)
    assert "accept 2" not in counts
