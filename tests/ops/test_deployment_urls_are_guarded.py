"""A remote deployment's URL is guarded as a webhook's is (webhook_urls, one function):
an allow-list of hosts (HITL_REMOTE_HOSTS) and no loopback, private or link-local
address unless HITL_REMOTE_ALLOW_PRIVATE says so; checked in the admin form and again,
with the name resolved, before every fetch. /healthz says only up or down."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import pytest

from hitl.core.models import RemoteDeployment
from hitl.core.remote.mirror import deployment_poll
from tests import http_stand_ins

BAD_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8123",
    "http://127.0.0.1:6379",
    "http://10.0.0.5",
    "http://[::ffff:127.0.0.1]:2024",
]


@pytest.fixture
def seen():
    """A local HTTP server that records every request it gets (none must arrive)."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"[]")

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http_stand_ins.serve(Handler)
    yield server.server_address[1], hits
    http_stand_ins.stop(server)


@pytest.fixture
def remote_hosts(settings, db):
    settings.HITL_REMOTE_HOSTS = ["*.example.com", "localhost:*", "127.0.0.1:*", "10.0.0.5"]
    settings.HITL_REMOTE_ALLOW_PRIVATE = False
    return settings


@pytest.mark.parametrize("url", BAD_URLS)
def test_admin_refuses_a_private_deployment_url(admin_client, remote_hosts, url):
    response = admin_client.post(
        "/admin/hitl/remotedeployment/add/",
        {"name": "prod", "base_url": url, "graphs": "[]", "enabled": "on"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "HITL_REMOTE_ALLOW_PRIVATE" in page or "HITL_REMOTE_HOSTS" in page
    assert not RemoteDeployment.objects.exists()


def test_admin_refuses_a_host_off_the_allow_list(admin_client, remote_hosts):
    response = admin_client.post(
        "/admin/hitl/remotedeployment/add/",
        {"name": "prod", "base_url": "https://agents.other.org", "graphs": "[]"},
    )
    assert response.status_code == 200 and "HITL_REMOTE_HOSTS" in response.content.decode()
    assert not RemoteDeployment.objects.exists()


def test_a_poll_refuses_a_stored_private_url_without_fetching_it(remote_hosts, seen):
    port, hits = seen
    for n, url in enumerate((f"http://127.0.0.1:{port}", f"http://localhost:{port}")):
        deployment = RemoteDeployment.objects.create(name=f"d{n}", base_url=url)
        assert deployment_poll(deployment)["failed"] == 1
        deployment.refresh_from_db()
        assert deployment.last_error.startswith("not allowed")
    assert hits == []


def test_the_explicit_allow_setting_lets_a_local_deployment_be_fetched(remote_hosts, seen):
    port, hits = seen
    remote_hosts.HITL_REMOTE_ALLOW_PRIVATE = True
    deployment = RemoteDeployment.objects.create(name="local", base_url=f"http://127.0.0.1:{port}")
    assert deployment_poll(deployment)["failed"] == 0
    assert hits  # it was asked


def test_healthz_says_only_up_or_down(client, remote_hosts, seen):
    port, _ = seen
    RemoteDeployment.objects.create(
        name="leaky", base_url="http://127.0.0.1:1", last_error="refused: internal secret body"
    )
    RemoteDeployment.objects.create(name="never", base_url="http://127.0.0.1:1")
    body = client.get("/healthz").json()
    assert body["remote"] == {"leaky": "down", "never": "down"}
    assert "secret" not in str(body)


def test_a_name_allowed_when_saved_is_checked_again_when_fetched(remote_hosts, seen):
    port, hits = seen
    assert socket.gethostbyname("localhost").startswith("127.")
    deployment = RemoteDeployment.objects.create(name="dns", base_url=f"http://localhost:{port}")
    assert deployment_poll(deployment)["failed"] == 1
    assert hits == []
