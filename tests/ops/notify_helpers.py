"""A real SMTP server process (aiosmtpd, writing a Maildir) and shared helpers for the
notification tests (e-mail approvals' own are in tests/integrations/email/conftest.py)."""

from __future__ import annotations

import email
import email.policy
import mailbox
from collections.abc import Iterator
from pathlib import Path

import pytest

from hitl.core import runs
from hitl.core.models import HumanInterrupt, NotificationPreference
from tests.conftest import BIN, ROOT, Proc, free_port, spawn, wait_for
from tests.ops.conftest import port_open


class SmtpServer:
    """`python -m aiosmtpd` on 127.0.0.1, storing every message in a Maildir."""

    def __init__(self, folder: Path, port: int | None = None):
        self.folder, self.port = folder, port or free_port()
        self.maildir = folder / "maildir"
        self.proc: Proc | None = None

    def start(self) -> SmtpServer:
        self.proc = spawn(
            [
                str(BIN / "python"),
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                f"127.0.0.1:{self.port}",
                "-c",
                "aiosmtpd.handlers.Mailbox",
                str(self.maildir),
            ],
            {"PATH": str(BIN), "HOME": str(ROOT)},
            self.folder / f"smtp-{self.port}.log",
        )
        wait_for(lambda: port_open(self.port), 20, 0.05, "the SMTP server to listen")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def messages(self) -> list[email.message.EmailMessage]:
        if not self.maildir.exists():
            return []
        box = mailbox.Maildir(self.maildir, create=False)
        found = []
        for key in box.iterkeys():
            raw = box.get_bytes(key)
            found.append(email.message_from_bytes(raw, policy=email.policy.default))
        return found


@pytest.fixture(name="smtp")
def smtp_fixture(tmp_path, settings) -> Iterator[SmtpServer]:
    server = SmtpServer(tmp_path).start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_TIMEOUT = 5
    yield server
    server.stop()


def text_of(message: email.message.EmailMessage) -> str:
    return message.get_body(preferencelist=("plain",)).get_content()


def html_of(message: email.message.EmailMessage) -> str:
    return message.get_body(preferencelist=("html",)).get_content()


@pytest.fixture(name="notify")
def notify_fixture(settings, manual_runs):
    """Notifications batched for 5 s, reminders 10 minutes before expiry, public links."""
    settings.HITL_NOTIFY_BATCH_SECONDS = 5
    settings.HITL_NOTIFY_REMIND_BEFORE = 600
    settings.HITL_PUBLIC_URL = "https://hitl.example.com"
    return settings


def start(manual_runs, capture, user, **request) -> HumanInterrupt:
    """Run the ops_gated graph to its pending item (what `request` asks of it)."""
    with capture(execute=True):
        run = runs.run_start(graph="ops_gated", input={"request": request}, user=user)
        assert manual_runs(run) == "interrupted"
    return HumanInterrupt.objects.get(thread=run.thread)


def with_email(user, address, **pref) -> NotificationPreference:
    user.email = address
    user.save()
    return NotificationPreference.objects.create(user=user, **pref)
