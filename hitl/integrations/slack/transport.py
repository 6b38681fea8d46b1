"""Posting to Slack: a notification to its incoming webhook, replies to an interaction's
response_url, and the Web API (chat.update, views.open) with the bot token.

Webhook and response_url POSTs go through the run-webhook guard (hitl/ops/outbound.py):
allow-listed host and port, checked resolved address, no redirects.
"""

from __future__ import annotations

import http.client
import json
import logging
from typing import Any

from django.conf import settings
from slack_sdk import WebClient

from hitl.core.models import Notification
from hitl.core.net.webhook_urls import WebhookNotAllowed
from hitl.ops.outbound import guarded_post

log = logging.getLogger(__name__)


def send(notification: Notification) -> None:
    """POST one notification's blocks to its webhook; raises unless Slack took it."""
    body = json.dumps(notification.payload, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "hitl-notify/1"}
    status = guarded_post(notification.address, body, headers)
    if not 200 <= status < 300:
        extra = ": redirects are not followed" if 300 <= status < 400 else ""
        raise http.client.HTTPException(f"HTTP {status}{extra}")


def web_client() -> WebClient:
    """Slack's Web API with the bot token, at HITL_SLACK_API_URL (tests: a local receiver)."""
    return WebClient(
        token=settings.HITL_SLACK_BOT_TOKEN,
        base_url=settings.HITL_SLACK_API_URL,
        timeout=int(settings.HITL_WEBHOOK_TIMEOUT),
    )


def post_response_url(url: str, body: dict[str, Any]) -> bool:
    """POST to an interaction's response_url (through the webhook guard); True when taken."""
    data = json.dumps(body, separators=(",", ":")).encode()
    try:
        status = guarded_post(url, data, {"Content-Type": "application/json"})
    except (WebhookNotAllowed, OSError, ValueError) as exc:
        log.warning("slack response_url refused or unreachable: %s", exc)
        return False
    return 200 <= status < 300


def tell(url: str, text: str) -> None:
    """Say something only the presser sees (a refusal) without touching the message."""
    if url:
        post_response_url(
            url, {"response_type": "ephemeral", "replace_original": False, "text": text}
        )
