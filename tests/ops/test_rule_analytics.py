"""The analytics page: automatic vs human decisions per rule and group, agreement, time saved."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from hitl.core import decisions
from hitl.core.models import HumanInterrupt
from tests.ops.analytics_helpers import (
    internal_mail_rule,
    never_delete_rule,
    people_took_four_and_eight_minutes,
)
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = pytest.mark.django_db


def test_analytics_shows_rules_agreement_and_time_saved(client, admin_user, requester, reviewer):
    never_delete_rule()
    internal_mail_rule()
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
    assert "median (p50) of 10.0m" in saved and "about <b>10.0m</b>" in saved
    # The rule's instant decision does not pull the people's latency down.
    latency = html[html.index('<svg id="latency-chart"') :]
    assert "p50 10.0m" in latency and "1 decision<" in latency
    assert delete.pk


def test_an_undone_answer_is_no_decision_and_the_counts_add_up(
    client, admin_user, requester, reviewer, second_reviewer
):
    """Issue 28: rita's accept, undone, then sam's: one human decision, not two; the rule's
    accept stays apart from people's, and both sections count the same decisions."""
    never_delete_rule()
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


def test_the_peoples_median_is_the_p50_the_latency_chart_shows(
    client, admin_user, requester, reviewer
):
    """Issue 38: "people's median of 6 s" beside "p50 5 s": one figure, one definition."""
    # People took four and eight minutes: a mean of the middle two would say six.
    people_took_four_and_eight_minutes(requester=requester, reviewer=reviewer)
    client.force_login(admin_user)
    html = client.get("/analytics/", {"days": "7"}).content.decode()
    (p50,) = re.findall(r"<td>all groups</td><td>2</td><td>([^<]+)</td>", html)
    saved = html[html.index('id="time-saved"') :]
    (median,) = re.findall(r"people's median \(p50\) of ([^ ]+) per decision", saved)
    assert median == p50 == "4.0m"
    assert "about <b>4.0m</b>" in saved
