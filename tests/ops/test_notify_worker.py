"""Notifications sent by a real Celery worker: a 50-interrupt fan-out becomes one e-mail
through a real SMTP process and one Slack POST, retried after the receiver fails once."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from hitl.core import runs
from hitl.core.models import GroupNotificationSettings, HumanInterrupt, Notification
from tests import http_stand_ins
from tests.conftest import wait_for
from tests.ops.notify_helpers import smtp_fixture, text_of  # noqa: F401

pytestmark = pytest.mark.postgres


class FlakyReceiver:
    """Answers 503 to the first `failures` POSTs, then 200."""

    def __init__(self, failures: int):
        self.bodies: list[bytes] = []
        self.statuses: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = 503 if len(receiver.statuses) < failures else 200
                receiver.bodies.append(body)
                receiver.statuses.append(status)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http_stand_ins.serve(Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/slack"

    def stop(self) -> None:
        http_stand_ins.stop(self.server)


def test_a_worker_sends_one_digest_per_channel_and_retries_a_failed_post(
    smtp, worker_factory, transactional_db, settings, requester, reviewer
):
    slack = FlakyReceiver(failures=1)
    reviewer.email = "rita@example.com"
    reviewer.save()
    GroupNotificationSettings.objects.create(
        group=reviewer.groups.get(), email_members=True, slack_webhook_url=slack.url
    )
    worker_factory(
        "w1",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(smtp.port),
        HITL_WEBHOOK_ALLOW_PRIVATE="1",
        HITL_WEBHOOK_HOSTS=f"127.0.0.1:{slack.port}",
        HITL_NOTIFY_BATCH_SECONDS="5",
        HITL_NOTIFY_BACKOFF_SECONDS="0.5",
        HITL_PUBLIC_URL="https://hitl.example.com",
    )
    settings.HITL_EXECUTOR = "celery"
    try:
        run = runs.run_start(
            graph="parallel_approval",
            input={"files": [f"f{i:02}.txt" for i in range(50)]},
            user=requester,
        )
        wait_for(
            lambda: Notification.objects.filter(status="sent").count() == 2,
            60,
            0.2,
            "both notifications to be sent",
        )
    finally:
        slack.stop()
    assert HumanInterrupt.objects.filter(thread=run.thread_id, status="pending").count() == 50
    email, posted = Notification.objects.order_by("channel")
    assert (email.channel, email.attempts, len(email.interrupt_ids)) == ("email", 1, 50)
    assert (posted.channel, posted.attempts) == ("slack", 2)
    assert [entry["ok"] for entry in posted.attempt_log] == [False, True]
    assert slack.statuses == [503, 200]
    assert (
        json.loads(slack.bodies[-1])["text"]
        == '[HITL] 50 items waiting for review on "parallel_approval"'
    )
    (message,) = smtp.messages()
    assert message["Subject"] == '[HITL] 50 items waiting for review on "parallel_approval"'
    assert text_of(message).count("https://hitl.example.com/n/") == 50
