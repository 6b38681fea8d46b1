"""Slack's side, played for real: a local HTTP server standing in for the incoming webhook,
interactions' response_url and the Web API (chat.update, views.open), and requests signed
exactly as Slack signs them (v0 HMAC-SHA256 over `v0:{timestamp}:{body}`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest

from hitl.core.models import HumanInterrupt, Notification, NotificationPreference, SlackUserLink
from hitl.ops.notifications import notification_attempt
from tests import http_stand_ins
from tests.review.conftest import human_interrupt, open_interrupts

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0HITL"


class SlackStandIn:
    """Records every POST: (path, headers, JSON body); answers like Slack (`{"ok": true}`)."""

    def __init__(self):
        self.requests: list[dict[str, Any]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                kind = self.headers.get("Content-Type", "")
                if "json" in kind:
                    body = json.loads(raw or b"{}")
                else:  # the Web API also takes form bodies
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                stand_in.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization", ""),
                        "body": body,
                    }
                )
                reply = b"ok"
                if self.path.startswith("/api/"):
                    reply = json.dumps({"ok": True, "ts": "1700000000.000100"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http_stand_ins.serve(Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.webhook = f"{self.base}/services/T0HITL/B0/incoming"
        self.response_url = f"{self.base}/actions/T0HITL/1/response"

    def to(self, prefix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].startswith(prefix)]

    def stop(self) -> None:
        http_stand_ins.stop(self.server)


@pytest.fixture(name="slack")
def slack_fixture(settings) -> Iterator[SlackStandIn]:
    """Slack interactivity on (signing secret), its API and webhooks on a local stand-in;
    runs are not dispatched and message updates wait for `run_message_updates`
    (HITL_EXECUTOR=manual: nothing is sent later, the test drives it)."""
    stand_in = SlackStandIn()
    settings.HITL_EXECUTOR = "manual"
    settings.HITL_SLACK_SIGNING_SECRET = SECRET
    settings.HITL_SLACK_BOT_TOKEN = ""
    settings.HITL_SLACK_API_URL = f"{stand_in.base}/api/"
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    settings.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{stand_in.port}"]
    settings.HITL_PUBLIC_URL = "https://hitl.example.com"
    settings.HITL_NOTIFY_BATCH_SECONDS = 5
    yield stand_in
    stand_in.stop()


@pytest.fixture
def bot(settings) -> None:
    """A bot token: messages are updated through the Web API (chat.update, views.open)."""
    settings.HITL_SLACK_BOT_TOKEN = "xoxb-test"


def run_message_updates() -> int:
    """Run the Slack message updates the decisions so far asked for (a worker's job in
    production; the manual executor holds them for the test)."""
    from hitl.core import later
    from hitl.integrations.slack.updates import REFRESH_TASK

    return later.run_held(REFRESH_TASK)


def sign(body: str, timestamp: str, secret: str = SECRET) -> str:
    """The X-Slack-Signature Slack sends with `body` at `timestamp`."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def form_body(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def post_signed(
    client, payload: dict[str, Any], *, at: float | None = None, secret: str = SECRET
) -> tuple[Any, dict[str, str]]:
    """POST an interaction as Slack does; returns (response, the headers sent)."""
    body = form_body(payload)
    timestamp = str(int(at if at is not None else time.time()))
    headers = {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": sign(body, timestamp, secret),
    }
    return send(client, body, headers), headers


def send(client, body: str, headers: dict[str, str]):
    return client.post(
        "/slack/interactivity/",
        data=body,
        content_type="application/x-www-form-urlencoded",
        **headers,
    )


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Every button of a message body, each with the block_id it sits in."""
    found = []
    for block in message["blocks"]:
        if block["type"] == "actions":
            for element in block["elements"]:
                found.append({**element, "block_id": block["block_id"]})
    return found


def button(message: dict[str, Any], action_id: str, interrupt_id: Any) -> dict[str, Any]:
    (found,) = [
        b
        for b in buttons(message)
        if b["action_id"] == action_id and b["block_id"].endswith(str(interrupt_id))
    ]
    return found


def press(
    stand_in: SlackStandIn,
    message: dict[str, Any],
    pressed: dict[str, Any],
    user_id: str,
    **user: Any,
) -> dict[str, Any]:
    """The block_actions payload Slack sends when `user_id` presses a button."""
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM, **user},
        "api_app_id": "A0HITL",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": "1700000000.000100",
            "channel_id": "C0REVIEW",
            "is_ephemeral": False,
        },
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "team": {"id": TEAM, "domain": "hitl-test"},
        "channel": {"id": "C0REVIEW", "name": "reviews"},
        "message": {"type": "message", "ts": "1700000000.000100", **message},
        "response_url": stand_in.response_url,
        "actions": [
            {
                "type": "button",
                "action_id": pressed["action_id"],
                "block_id": pressed["block_id"],
                "value": pressed["value"],
                "text": pressed["text"],
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def submit(view: dict[str, Any], user_id: str, text: str) -> dict[str, Any]:
    """The view_submission payload of the Respond modal `view` with `text` typed."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "hitl-test"},
        "user": {"id": user_id, "username": user_id.lower(), "team_id": TEAM},
        "view": {
            **view,
            "id": "V0MODAL",
            "state": {"values": {"answer": {"text": {"type": "plain_text_input", "value": text}}}},
        },
    }


@pytest.fixture(name="linked")
def linked_fixture(reviewer, second_reviewer, requester):
    """rita, sam and quinn have linked Slack accounts."""
    for slack_id, user in [
        ("U0RITA", reviewer),
        ("U0SAM", second_reviewer),
        ("U0QUINN", requester),
    ]:
        SlackUserLink.objects.create(slack_user_id=slack_id, team_id=TEAM, user=user)


def notified(capture, slack, requester, reviewer, *values) -> tuple[list[HumanInterrupt], dict]:
    """Pause a thread on `values`, send rita's Slack message; (rows, the message Slack got)."""
    NotificationPreference.objects.get_or_create(
        user=reviewer, defaults={"email": False, "slack_webhook_url": slack.webhook}
    )
    with capture(execute=True):
        _, rows = open_interrupts(user=requester, values=list(values) or [human_interrupt()])
    (note,) = Notification.objects.filter(channel="slack", status="collecting")
    notification_attempt(notification_id=note.pk, now=note.send_after)
    note.refresh_from_db()
    assert note.status == "sent", note.last_error
    (hit,) = slack.to("/services/")
    return rows, hit["body"]
