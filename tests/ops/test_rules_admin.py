"""Decision rules and four-eyes policies in admin: refused when broken, evidence shown."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from hitl.core import decisions
from hitl.core.models import DecisionRule, ReviewerGroupPolicy
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = pytest.mark.django_db

ADD = "admin:hitl_decisionrule_add"


@pytest.fixture
def admin_client_for(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def rule_form(**fields) -> dict:
    form = {
        "name": "internal-mail",
        "mode": "dry_run",
        "priority": 100,
        "graph": "",
        "action": "send_email",
        "reviewer_group": "",
        "condition": 'args.to.endsWith("@ourcompany.com")',
        "outcome": "accept",
        "response_text": "",
    }
    form.update(fields)
    return form


@pytest.mark.parametrize(
    "condition, message",
    [
        ("args.to.endsWith(", "The condition does not parse"),
        ('recipient == "x"', "Unknown name &#x27;recipient&#x27; in the condition"),
        ('args.recipient == "x"', "&#x27;send_email&#x27; has no argument &#x27;recipient&#x27;"),
    ],
)
def test_a_bad_rule_is_refused_on_save_with_a_clear_message(
    admin_client_for, requester, condition, message
):
    open_interrupts(user=requester, values=[human_interrupt("send_email", {"to": "a@b.c"})])
    response = admin_client_for.post(reverse(ADD), rule_form(condition=condition))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not DecisionRule.objects.exists()


def test_a_responding_rule_needs_its_text(admin_client_for):
    response = admin_client_for.post(reverse(ADD), rule_form(outcome="respond"))
    assert response.status_code == 200
    assert b"A rule that responds needs the text it sends." in response.content
    assert not DecisionRule.objects.exists()


def test_a_good_rule_is_saved_and_its_dry_run_evidence_listed(
    admin_client_for, requester, reviewer
):
    response = admin_client_for.post(reverse(ADD), rule_form())
    assert response.status_code == 302
    rule = DecisionRule.objects.get()
    assert (rule.mode, rule.version) == ("dry_run", 1)
    _, [row] = open_interrupts(
        user=requester, values=[human_interrupt("send_email", {"to": "x@ourcompany.com"})]
    )
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")

    page = admin_client_for.get(reverse("admin:hitl_decisionrule_changelist")).content.decode()
    assert "1 of 1 (100%)" in page
    detail = admin_client_for.get(reverse("admin:hitl_decisionrule_change", args=[rule.pk]))
    assert "1 dry-run hits; agrees with people on 1 of 1 (100%)" in detail.content.decode()


def test_the_four_eyes_policy_is_set_in_admin(admin_client_for, reviewers_group, finance_group):
    form = {
        "group": reviewers_group.pk,
        "expiry_policy": "ignore",
        "approvals_required": 2,
        "approval_groups": [finance_group.pk],
        "reject_ends": "on",
    }
    response = admin_client_for.post(reverse("admin:hitl_reviewergrouppolicy_add"), form)
    assert response.status_code == 302
    policy = ReviewerGroupPolicy.objects.get()
    assert (policy.approvals_required, policy.reject_ends, policy.allow_self_approval) == (
        2,
        True,
        False,
    )
    assert list(policy.approval_groups.values_list("name", flat=True)) == ["finance"]

    form.update(approvals_required=0)
    response = admin_client_for.post(
        reverse("admin:hitl_reviewergrouppolicy_change", args=[policy.pk]), form
    )
    assert b"Ask for between 1 and 20 approvals." in response.content
