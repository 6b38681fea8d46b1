"""An e-mail address the identity provider did not verify is not trusted.

OpenID Connect Core 5.1: only `email_verified: true` says the address is the user's; false
or no claim at all promises nothing. Such an address is not stored on the SSO user, so
Slack's e-mail matching (HITL_SLACK_MATCH_EMAIL) cannot name them from it.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from hitl.core.models import HumanInterrupt
from tests.integrations.slack.conftest import (  # noqa: F401
    button,
    notified,
    post_signed,
    press,
    slack_fixture,
)
from tests.sso.conftest import sso_login

User = get_user_model()


def press_as_fin(django_capture_on_commit_callbacks, slack, requester, reviewer) -> HumanInterrupt:
    """fin (a reviewer through SSO) presses Approve in Slack, known only by e-mail."""
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    approve = button(message, "hitl_accept", row.pk)
    with django_capture_on_commit_callbacks(execute=True):
        response, _ = post_signed(
            Client(), press(slack, message, approve, "U0FIN", email="fin@example.com")
        )
    assert response.status_code == 200
    row.refresh_from_db()
    return row


@pytest.mark.parametrize("verified", [False, None, "false", 1])  # None: the claim is left out
def test_an_unverified_email_is_not_stored_and_slack_does_not_match_it(
    django_capture_on_commit_callbacks, sso, slack, settings, requester, reviewer, verified
):
    settings.HITL_SLACK_MATCH_EMAIL = True
    sso.set_claims("fin.sso", email_verified=verified)
    assert sso_login(Client(), "fin.sso").status_code == 302  # signed in all the same
    fin = User.objects.get(username="fin.sso")
    assert fin.email == ""

    row = press_as_fin(django_capture_on_commit_callbacks, slack, requester, reviewer)
    assert row.status == "pending" and row.responded_by is None
    assert "not linked" in slack.to("/actions/")[-1]["body"]["text"]


def test_an_unverified_email_does_not_replace_the_address_an_admin_set(sso):
    sso_login(Client(), "fin.sso")
    User.objects.filter(username="fin.sso").update(email="fin.admin@example.com")
    sso.set_claims("fin.sso", email="attacker@example.com", email_verified=False)
    sso_login(Client(), "fin.sso")
    assert User.objects.get(username="fin.sso").email == "fin.admin@example.com"


def test_a_verified_email_is_stored_and_slack_matches_it(
    django_capture_on_commit_callbacks, sso, slack, settings, requester, reviewer
):
    settings.HITL_SLACK_MATCH_EMAIL = True
    sso_login(Client(), "fin.sso")  # the provider says email_verified: true
    fin = User.objects.get(username="fin.sso")
    assert fin.email == "fin@example.com"

    row = press_as_fin(django_capture_on_commit_callbacks, slack, requester, reviewer)
    assert (row.status, row.responded_by) == ("resolved", fin)
