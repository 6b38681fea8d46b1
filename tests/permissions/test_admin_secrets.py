"""Every admin page that names a model holding a secret, for a view-only staff user and a
superuser: the secret string itself appears on none of them (list, change/view, history,
delete confirmation, the admin index's recent actions). Secrets are write-only: a form sets
or replaces one (blank keeps it) and never shows it back. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.utils import timezone

from hitl.core.models import (
    GroupNotificationSettings,
    Notification,
    NotificationPreference,
    RemoteDeployment,
    Run,
    Thread,
    WebhookDelivery,
)
from tests.conftest import _make_user

API_KEY = "lsv2_sk_3c1fd0e8b2a94e7f_remote_key"
RUN_HOOK = "https://hooks.zapier.example/hooks/catch/123/zapS3cr3tPath/"
GROUP_HOOK = "https://hooks.slack.example/services/T000/B000/gr0upS3cr3tXyZ"
USER_HOOK = "https://hooks.slack.example/services/T000/B111/us3rS3cr3tQwE"


@dataclass
class Secretive:
    model: Any
    obj: Any
    secret: str


@pytest.fixture
def secretive(db, requester) -> list[Secretive]:
    group = Group.objects.create(name="ops-team")
    thread = Thread.objects.create(graph="approval", requester=requester)
    # A run's webhook URL may be a catch-hook whose path is the credential.
    run = Run.objects.create(thread=thread, kind="start", webhook=RUN_HOOK)
    return [
        Secretive(Run, run, RUN_HOOK),
        Secretive(
            WebhookDelivery,
            WebhookDelivery.objects.create(run=run, event="run.finished", url=RUN_HOOK),
            RUN_HOOK,
        ),
        Secretive(
            RemoteDeployment,
            RemoteDeployment.objects.create(
                name="prod", base_url="https://agents.example.com", api_key=API_KEY
            ),
            API_KEY,
        ),
        Secretive(
            GroupNotificationSettings,
            GroupNotificationSettings.objects.create(group=group, slack_webhook_url=GROUP_HOOK),
            GROUP_HOOK,
        ),
        Secretive(
            NotificationPreference,
            NotificationPreference.objects.create(user=requester, slack_webhook_url=USER_HOOK),
            USER_HOOK,
        ),
        # The outbox: a Slack message's address is the channel's webhook URL.
        Secretive(
            Notification,
            Notification.objects.create(
                channel="slack", address=GROUP_HOOK, send_after=timezone.now(), subject="hello"
            ),
            GROUP_HOOK,
        ),
    ]


def _viewer(models) -> Any:
    user = _make_user("vic", is_staff=True)
    for model in models:
        user.user_permissions.add(
            Permission.objects.get(
                codename=f"view_{model._meta.model_name}", content_type__app_label="hitl"
            )
        )
    return user


def _pages(item: Secretive, superuser: bool) -> list[str]:
    base = f"/admin/hitl/{item.model._meta.model_name}/"
    pages = [base, f"{base}{item.obj.pk}/change/", f"{base}{item.obj.pk}/history/"]
    if superuser:
        pages.append(f"{base}{item.obj.pk}/delete/")
    return pages + ["/admin/"]


@pytest.mark.parametrize("role", ["view_only_staff", "superuser"])
def test_no_admin_page_shows_a_secret(role, secretive):
    models = [item.model for item in secretive]
    superuser = role == "superuser"
    user = _make_user("ada", is_staff=True, is_superuser=True) if superuser else _viewer(models)
    for item in secretive:
        # A change by an admin lands in the history and in the index's recent actions.
        LogEntry.objects.log_actions(
            user_id=user.pk, queryset=[item.obj], action_flag=CHANGE, change_message="changed"
        )
    client = Client()
    client.force_login(user)
    for item in secretive:
        for page in _pages(item, superuser):
            response = client.get(page)
            if page.endswith("/delete/") and response.status_code == 403:
                continue  # that admin deletes nothing
            assert response.status_code == 200, (role, page, response.status_code)
            assert item.secret not in response.content.decode(), (role, page)
        if admin.site._registry[item.model].search_fields:
            # Searching for a piece of the secret finds nothing: no oracle to guess it by.
            base = f"/admin/hitl/{item.model._meta.model_name}/"
            listed = client.get(base, {"q": item.secret[-12:]}).content.decode()
            assert f"{base}{item.obj.pk}/change/" not in listed, (role, base)


def test_a_remote_key_is_set_replaced_and_kept_but_never_shown(db, admin_user, settings):
    settings.HITL_REMOTE_HOSTS = ["agents.example.com"]
    deployment = RemoteDeployment.objects.create(
        name="prod", base_url="https://agents.example.com", api_key=API_KEY
    )
    client = Client()
    client.force_login(admin_user)
    page = f"/admin/hitl/remotedeployment/{deployment.pk}/change/"
    form = {"name": "prod", "base_url": "https://agents.example.com", "graphs": "[]"}
    assert client.post(page, {**form, "api_key": ""}).status_code == 302
    deployment.refresh_from_db()
    assert deployment.api_key == API_KEY  # blank keeps it
    assert client.post(page, {**form, "api_key": "new-key-77"}).status_code == 302
    deployment.refresh_from_db()
    assert deployment.api_key == "new-key-77"
    assert "new-key-77" not in client.get(page).content.decode()


@pytest.mark.parametrize("model", ["groupnotificationsettings", "notificationpreference"])
def test_a_slack_webhook_url_is_set_replaced_and_kept_but_never_shown(
    model, secretive, admin_user, settings
):
    settings.HITL_WEBHOOK_HOSTS = ["hooks.slack.example"]
    item = next(i for i in secretive if i.model._meta.model_name == model)
    client = Client()
    client.force_login(admin_user)
    page = f"/admin/hitl/{model}/{item.obj.pk}/change/"
    html = client.get(page).content.decode()
    assert 'name="slack_webhook_url"' in html and item.secret not in html
    if model == "groupnotificationsettings":
        form = {"group": item.obj.group_id, "email_addresses": "", "digest_minutes": 0}
    else:
        form = {"user": item.obj.user_id, "email": "on", "digest_minutes": 0, "timezone": "UTC"}
    response = client.post(page, {**form, "slack_webhook_url": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    item.obj.refresh_from_db()
    assert item.obj.slack_webhook_url == item.secret  # blank keeps it
    replaced = "https://hooks.slack.example/services/T000/B222/n3wS3cr3t"
    assert client.post(page, {**form, "slack_webhook_url": replaced}).status_code == 302
    item.obj.refresh_from_db()
    assert item.obj.slack_webhook_url == replaced
    assert replaced not in client.get(page).content.decode()
    cleared = client.post(page, {**form, "slack_webhook_url": "", "clear_slack_webhook_url": "on"})
    assert cleared.status_code == 302
    item.obj.refresh_from_db()
    assert item.obj.slack_webhook_url == ""


def test_healthz_and_metrics_name_no_secret(secretive, settings, client):
    settings.HITL_METRICS_PUBLIC = True
    settings.HITL_METRICS_TOKEN = ""
    settings.HITL_SLACK_BOT_TOKEN = "xoxb-bot-t0ken-9f8e7d"
    settings.HITL_SLACK_SIGNING_SECRET = "slack-signing-s3cr3t-5a4b"
    settings.HITL_WEBHOOK_SECRET = "webhook-s3cr3t-1c2d"
    RemoteDeployment.objects.filter(name="prod").update(last_error="the API key was refused (401)")
    secrets = [item.secret for item in secretive] + [
        settings.SECRET_KEY,
        settings.HITL_SLACK_BOT_TOKEN,
        settings.HITL_SLACK_SIGNING_SECRET,
        settings.HITL_WEBHOOK_SECRET,
    ]
    for page in ("/healthz", "/metrics"):
        response = client.get(page)
        assert response.status_code == 200, page
        body = response.content.decode()
        assert not any(secret in body for secret in secrets), page
