"""A deployment that is down costs a call one retry, not langgraph_sdk's five."""

from __future__ import annotations

import httpcore
import pytest

from hitl.core.models import RemoteDeployment
from hitl.core.remote import client as remote_client
from hitl.core.remote.mirror import deployment_poll
from tests.conftest import free_port

pytestmark = pytest.mark.django_db


def test_a_refusing_deployment_is_tried_twice_per_call_and_marked_unreachable(
    reviewers_group, monkeypatch
):
    port = free_port()  # nothing listens there: every connection is refused
    deployment = RemoteDeployment.objects.create(
        name="down", base_url=f"http://127.0.0.1:{port}", reviewer_group=reviewers_group
    )
    attempts: list[int] = []
    connect = httpcore.SyncBackend.connect_tcp

    def counted(self, **kwargs):
        if kwargs["port"] == port:
            attempts.append(port)
        return connect(self, **kwargs)

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", counted)
    assert deployment_poll(deployment)["failed"] == 1
    assert len(attempts) == 1 + remote_client.CONNECT_RETRIES == 2
    deployment.refresh_from_db()
    assert deployment.last_error == "unreachable (ConnectError)"


def test_a_deployment_without_a_key_sends_none_whatever_this_process_has(
    reviewers_group, monkeypatch
):
    monkeypatch.setenv("LANGGRAPH_API_KEY", "this-process-key")
    keyless = RemoteDeployment.objects.create(
        name="open", base_url="http://127.0.0.1:9", reviewer_group=reviewers_group
    )
    keyed = RemoteDeployment.objects.create(
        name="keyed",
        base_url="http://127.0.0.1:9",
        api_key="its-key",
        reviewer_group=reviewers_group,
    )
    with remote_client.client_for(keyless) as client:
        assert "x-api-key" not in client.http.client.headers
    with remote_client.client_for(keyed) as client:
        assert client.http.client.headers["x-api-key"] == "its-key"
