"""Webhook deliveries against real HTTP receivers started by the test: no redirects,
resolved addresses checked, host and port allow-listed, Standard Webhooks signatures.

Deliveries are attempted in this process (`delivery_attempt`), so the module runs on
SQLite and on PostgreSQL; tests/api/test_webhooks.py covers the worker path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from hitl.core.models import Run, Thread, WebhookDelivery
from hitl.core.net.webhook_urls import WebhookNotAllowed, address_allowed, webhook_check_url
from hitl.ops import webhooks
from tests import http_stand_ins

SECRET = "delivery-test-secret"


class Receiver:
    """An HTTP server on 127.0.0.1 recording POSTs, answering `status` (+ `location`)."""

    def __init__(self, status: int = 200, location: str = ""):
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append(
                    {"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
                )
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST  # noqa: N815 (a followed redirect would arrive as a GET)

            def log_message(self, *args):
                pass

        self.server = http_stand_ins.serve(Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"

    def stop(self) -> None:
        http_stand_ins.stop(self.server)


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    started: list[Receiver] = []
    yield started
    for receiver in started:
        receiver.stop()


def start(receivers: list[Receiver], **kwargs) -> Receiver:
    receiver = Receiver(**kwargs)
    receivers.append(receiver)
    return receiver


@pytest.fixture
def hooks(settings):
    settings.HITL_WEBHOOK_SECRET = SECRET
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    settings.HITL_WEBHOOK_MAX_ATTEMPTS = 3
    settings.HITL_WEBHOOK_BACKOFF_SECONDS = 0.5
    return settings


def delivery_to(url: str, requester) -> WebhookDelivery:
    thread = Thread.objects.create(graph="approval", requester=requester)
    run = Run.objects.create(thread=thread, kind="start", status="success", webhook=url)
    return WebhookDelivery.objects.create(
        run=run, event="run.success", url=url, payload={"event": "run.success", "n": 1}
    )


def test_a_delivery_verifies_with_the_standard_webhooks_library(hooks, receivers, requester):
    receiver = start(receivers)
    hooks.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{receiver.port}"]
    delivery = delivery_to(receiver.url, requester)

    assert webhooks.delivery_attempt(delivery_id=delivery.pk) is None

    (hit,) = receiver.requests
    # What a receiver does with off-the-shelf code and the secret HITL prints for it.
    verifier = Webhook(webhooks.receiver_secret())
    verified = verifier.verify(hit["body"], hit["headers"])
    # As LangGraph Server does, each attempt says when it was sent.
    sent_at = datetime.fromisoformat(verified.pop("webhook_sent_at"))
    assert abs((timezone.now() - sent_at).total_seconds()) < 300
    assert verified == {"event": "run.success", "n": 1}
    assert hit["headers"]["webhook-id"] == str(delivery.pk)
    with pytest.raises(WebhookVerificationError):
        verifier.verify(hit["body"] + b" ", hit["headers"])
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "b3RoZXI=").verify(hit["body"], hit["headers"])
    # The older header still verifies, for receivers written against it.
    assert webhooks.verify(hit["body"], hit["headers"]["x-hitl-signature"], secret=SECRET.encode())
    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_status) == ("delivered", 200)


def test_a_whsec_secret_is_used_as_given(hooks, receivers, requester):
    hooks.HITL_WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    receiver = start(receivers)
    hooks.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{receiver.port}"]
    delivery = delivery_to(receiver.url, requester)
    webhooks.delivery_attempt(delivery_id=delivery.pk)
    assert webhooks.receiver_secret() == hooks.HITL_WEBHOOK_SECRET
    (hit,) = receiver.requests
    assert Webhook(hooks.HITL_WEBHOOK_SECRET).verify(hit["body"], hit["headers"])


def test_a_redirect_is_not_followed(hooks, receivers, requester):
    elsewhere = start(receivers)
    redirecting = start(receivers, status=302, location=elsewhere.url)
    hooks.HITL_WEBHOOK_HOSTS = ["127.0.0.1:*"]
    delivery = delivery_to(redirecting.url, requester)

    assert webhooks.delivery_attempt(delivery_id=delivery.pk) == 0.5  # a failed attempt

    assert len(redirecting.requests) == 1
    assert elsewhere.requests == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_status) == ("pending", 302)
    assert "redirects are not followed" in delivery.last_error


def test_a_loopback_receiver_is_refused_unless_the_operator_allows_it(hooks, receivers, requester):
    receiver = start(receivers)
    hooks.HITL_WEBHOOK_ALLOW_PRIVATE = False
    # A name on the allow-list that resolves to loopback: refused at delivery.
    hooks.HITL_WEBHOOK_HOSTS = [f"localhost:{receiver.port}"]
    url = f"http://localhost:{receiver.port}/hook"
    delivery = delivery_to(url, requester)

    assert webhooks.delivery_attempt(delivery_id=delivery.pk) is None  # given up at once

    assert receiver.requests == []
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert "HITL_WEBHOOK_ALLOW_PRIVATE" in delivery.last_error
    # An address literal is refused when the run is created.
    hooks.HITL_WEBHOOK_HOSTS = ["127.0.0.1:*"]
    with pytest.raises(WebhookNotAllowed, match="loopback, private or link-local"):
        webhook_check_url(receiver.url)
    hooks.HITL_WEBHOOK_ALLOW_PRIVATE = True
    again = delivery_to(url, requester)
    hooks.HITL_WEBHOOK_HOSTS = [f"localhost:{receiver.port}"]
    assert webhooks.delivery_attempt(delivery_id=again.pk) is None
    assert len(receiver.requests) == 1


def test_a_port_off_the_allow_list_is_refused_before_any_connection(hooks, receivers, requester):
    receiver = start(receivers)
    hooks.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{receiver.port + 1}"]
    delivery = delivery_to(receiver.url, requester)
    assert webhooks.delivery_attempt(delivery_id=delivery.pk) is None
    assert receiver.requests == []
    delivery.refresh_from_db()
    assert delivery.status == "failed" and f"port {receiver.port}" in delivery.last_error


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://hooks.example.com/a", True),
        ("https://hooks.example.com:443/a", True),
        ("https://hooks.example.com:8443/a", False),
        ("http://hooks.example.com:443/a", False),  # http: the default is 80
        ("https://alt.example.com:8443/a", True),
        ("https://alt.example.com/a", False),
        ("http://any.example.org:1234/a", True),
        ("http://example.org/a", False),
        ("https://[2606:4700::1111]:9000/a", True),
        ("https://hooks.example.com:99999/a", False),
    ],
)
def test_the_allow_list_names_host_and_port(settings, url, ok):
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = False
    settings.HITL_WEBHOOK_HOSTS = [
        "hooks.example.com",
        "alt.example.com:8443",
        "*.example.org:*",
        "[2606:4700::1111]:9000",
    ]
    if ok:
        assert webhook_check_url(url) == url
    else:
        with pytest.raises(WebhookNotAllowed):
            webhook_check_url(url)


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("93.184.215.14", True),
        ("2606:4700::1111", True),
    ],
)
def test_only_public_addresses_are_allowed_by_default(settings, address, ok):
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = False
    assert address_allowed(address) is ok
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    assert address_allowed(address) is True


def test_the_payload_on_the_wire_is_the_signed_json(hooks, receivers, requester):
    receiver = start(receivers)
    hooks.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{receiver.port}"]
    delivery = delivery_to(receiver.url, requester)
    webhooks.delivery_attempt(delivery_id=delivery.pk)
    (hit,) = receiver.requests
    body = json.loads(hit["body"])
    assert isinstance(body.pop("webhook_sent_at"), str)  # when this attempt went out
    assert body == delivery.payload
    assert hit["headers"]["host"] == f"127.0.0.1:{receiver.port}"
