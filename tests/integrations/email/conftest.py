"""E-mail approvals' helpers: a thread paused and mailed to reviewers, with each one's
one-click links; the SMTP server is tests/ops/notify_helpers.py's."""

from __future__ import annotations

import re

import pytest

from hitl.core.models import AuditEvent, HumanInterrupt, Notification
from hitl.ops.notifications import notification_attempt
from tests.ops.notify_helpers import smtp_fixture, text_of, with_email  # noqa: F401
from tests.review.conftest import human_interrupt, open_interrupts

PUBLIC = "https://hitl.example.com"  # HITL_PUBLIC_URL of the e-mail link tests


def mailed(capture, smtp, requester, users, *values) -> tuple[list[HumanInterrupt], dict]:
    """Pause a thread on `values` and mail each user; (rows, {username: {label: path}})."""
    for user in users:
        with_email(user, f"{user.username}@example.com")
    with capture(execute=True):
        _, rows = open_interrupts(user=requester, values=list(values) or [human_interrupt()])
    for note in Notification.objects.filter(status="collecting"):
        notification_attempt(notification_id=note.pk, now=note.send_after)
    links: dict[str, dict[str, str]] = {}
    for message in smtp.messages():
        found = re.findall(r"^\s+(Approve|Ignore|Respond): (\S+)$", text_of(message), re.M)
        links[message["To"].split("@")[0]] = {label: url[len(PUBLIC) :] for label, url in found}
    return rows, links


@pytest.fixture
def four_eyes_mailed(
    django_capture_on_commit_callbacks, smtp, requester, reviewer, second_reviewer
) -> tuple[HumanInterrupt, dict]:
    """An item that needs two approvals, mailed to rita and sam; (row, links as `mailed`)."""
    (row,), links = mailed(
        django_capture_on_commit_callbacks,
        smtp,
        requester,
        [reviewer, second_reviewer],
        human_interrupt(approvals=2),
    )
    return row, links


@pytest.fixture(autouse=True)
def public(settings):
    settings.HITL_EXECUTOR = "manual"
    settings.HITL_PUBLIC_URL = PUBLIC
    settings.HITL_NOTIFY_BATCH_SECONDS = 5


def pending(row) -> bool:
    row.refresh_from_db()
    return row.status == "pending"


def answered(row) -> int:
    return AuditEvent.objects.filter(interrupt_id=row.pk, kind__startswith="interrupt.a").count()
