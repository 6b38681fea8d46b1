"""Admin forms say what their fields mean, in real Chromium: the policy, notification,
remote deployment and assistant forms, and the cron list (by assistant name, and where
crons come from)."""

from __future__ import annotations

import pytest

from hitl.core.resources.assistants import AssistantFields, assistant_create
from hitl.core.resources.crons import cron_create
from tests.review import test_browser as base
from tests.review.screens import shots

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def help_of(page, field: str) -> str:
    return page.inner_text(f".field-{field} .help")


def label_of(page, field: str) -> str:
    return page.inner_text(f"label[for=id_{field}]")


def test_the_admin_forms_explain_their_fields(asgi_server, browser_page, admin_user):
    page = browser_page(asgi_server, admin_user.username)

    page.goto("/admin/hitl/reviewergrouppolicy/add/")
    assert label_of(page, "expire_after_seconds").startswith("Expire after (seconds)")
    assert "Empty: items wait forever" in help_of(page, "expire_after_seconds")
    assert "different reviewers" in help_of(page, "approvals_required")
    assert "1: one reviewer decides" in help_of(page, "approvals_required")
    assert "the group an expired item moves to" in help_of(page, "escalate_to")
    assert "auto-respond" in help_of(page, "expiry_policy")
    shots(page, "admin-policy-form")

    page.goto("/admin/hitl/groupnotificationsettings/add/")
    assert label_of(page, "slack_webhook_url").startswith("Slack webhook URL")
    assert "one per line" in help_of(page, "email_addresses")
    assert help_of(page, "digest_minutes").startswith("0: a message as items arrive")
    shots(page, "admin-group-notifications-form")

    page.goto("/admin/hitl/notificationpreference/add/")
    assert label_of(page, "slack_webhook_url").startswith("Slack webhook URL")
    assert "set both, or neither" in help_of(page, "quiet_start")

    page.goto("/admin/hitl/remotedeployment/add/")
    assert label_of(page, "base_url").startswith("Base URL")
    assert label_of(page, "api_key").startswith("API key")

    page.goto("/admin/hitl/assistant/add/")
    assert '"configurable"' in help_of(page, "config")
    assert "runtime context" in help_of(page, "context")
    assert "the graph does not see it" in help_of(page, "metadata")
    shots(page, "admin-assistant-form")
    assert page.errors == []


def test_the_cron_list_names_assistants_and_says_crons_come_from_the_api(
    asgi_server, browser_page, admin_user
):
    nightly = assistant_create(
        user=admin_user, graph="approval", fields=AssistantFields(name="Nightly approvals")
    )
    cron_create(
        user=admin_user, assistant_id=nightly.assistant_id, schedule="0 2 * * *", payload={}
    )
    cron_create(user=admin_user, assistant_id="approval", schedule="0 3 * * *", payload={})
    page = browser_page(asgi_server, admin_user.username)
    page.goto("/admin/hitl/cron/")
    names = page.locator("#result_list td.field-assistant").all_inner_texts()
    assert sorted(names) == ["Nightly approvals (approval)", "approval (default assistant)"]
    assert "Crons are made through the API" in page.inner_text(".cron-source")
    assert page.locator(".object-tools a.addlink").count() == 0
    shots(page, "admin-cron-list")
    page.click("#result_list th.field-schedule a >> nth=0")
    page.wait_for_selector(".field-assistant .readonly")
    assert page.inner_text(".field-assistant .readonly").endswith(")")
    assert page.errors == []
