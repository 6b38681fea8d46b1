"""Assistants in Django admin: saving adds a version through the same service as the API."""

from __future__ import annotations

import json

from django.test import Client
from django.urls import reverse

from hitl.core.models import Assistant, AuditEvent


def _form(**fields):
    data = {
        "graph": "approval",
        "name": "Approval for finance",
        "description": "",
        "config": json.dumps({"configurable": {"team": "finance"}}),
        "context": json.dumps({}),
        "metadata": json.dumps({"owner": "fin"}),
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
    }
    data.update(fields)
    return data


def test_an_admin_creates_and_changes_an_assistant_as_new_versions(admin_user):
    client = Client()
    client.force_login(admin_user)
    response = client.post(reverse("admin:hitl_assistant_add"), _form())
    assert response.status_code == 302, response.content[:2000]
    row = Assistant.objects.get()
    assert (row.graph, row.version, row.created_by) == ("approval", 1, admin_user)

    change = reverse("admin:hitl_assistant_change", args=[row.pk])
    assert client.get(change).status_code == 200
    response = client.post(
        change,
        _form(
            config=json.dumps({"configurable": {"team": "ops"}}),
            **{
                "versions-TOTAL_FORMS": "1",
                "versions-INITIAL_FORMS": "1",
                "versions-0-id": str(row.versions.get().pk),
                "versions-0-assistant": str(row.pk),
            },
        ),
    )
    assert response.status_code == 302, response.content[:3000]
    row.refresh_from_db()
    assert row.version == 2 and row.config == {"configurable": {"team": "ops"}}
    assert list(row.versions.order_by("version").values_list("version", flat=True)) == [1, 2]
    assert AuditEvent.objects.filter(kind="assistant.updated").count() == 1


def test_admin_refuses_a_config_that_sets_hitl_keys(admin_user):
    client = Client()
    client.force_login(admin_user)
    bad = _form(config=json.dumps({"configurable": {"thread_id": "x"}}))
    response = client.post(reverse("admin:hitl_assistant_add"), bad)
    assert response.status_code == 200 and b"HITL sets the thread" in response.content
    assert not Assistant.objects.exists()


def test_admin_shows_a_form_error_for_a_context_with_a_reserved_key(admin_user):
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    for context in ({"thread_id": "x"}, {"hitl_user": 1}, {"__pregel_x": 1}):
        response = client.post(
            reverse("admin:hitl_assistant_add"), _form(context=json.dumps(context))
        )
        assert response.status_code == 200, response.content[:500]
        assert "may not set" in response.content.decode()
    assert not Assistant.objects.exists()
