"""Sending mail: a notification (text with its HTML part) and the preferences page's test."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection, send_mail
from django.urls import reverse

from hitl.core.models import Notification


def send(notification: Notification) -> None:
    """Mail one notification; SMTP errors propagate (the outbox retries)."""
    # `wire` is the rendered copy with its one-click links; the stored body has them hidden.
    body, payload = getattr(notification, "wire", (notification.body, notification.payload))
    message = EmailMultiAlternatives(
        subject=notification.subject,
        body=body,
        to=[notification.address],
        connection=get_connection(fail_silently=False),
        headers={"X-HITL-Notification": str(notification.pk)},
    )
    if payload.get("html"):
        message.attach_alternative(payload["html"], "text/html")
    message.send()


def send_test(address: str) -> None:
    """Mail a test message to `address`; SMTP errors propagate."""
    send_mail(
        "[HITL] Test message",
        "This is a test from HITL: notifications about items waiting for your review "
        f"reach this address.\n\n{settings.HITL_PUBLIC_URL}{reverse('notify-preferences')}\n",
        None,
        [address],
        fail_silently=False,
    )
