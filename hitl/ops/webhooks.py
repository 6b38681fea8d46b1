"""Run webhooks: a signed JSON POST when a run pauses on interrupts and when it ends.

`delivery_create` runs inside the transaction that records the run's outcome
(core's run.ended event, subscribed in hitl/ops/apps.py), so a delivery row exists exactly when the outcome
does; the POST itself happens after commit, in the `webhook_deliver` Celery task,
retried with exponential backoff until HITL_WEBHOOK_MAX_ATTEMPTS. Every attempt is
recorded on the WebhookDelivery row (visible in admin).

Receivers verify `X-HITL-Signature: t=<unix>,v1=<hex>` where hex is
HMAC-SHA256(secret, f"{t}.{body}") — the timestamp is signed so a captured request
cannot be replayed later with a fresh one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from hitl.core.errors import error_line
from hitl.core.events import RunEnded
from hitl.core.models import HumanInterrupt, Run, WebhookDelivery
from hitl.core.webhook_urls import WebhookNotAllowed, webhook_check_url

log = logging.getLogger(__name__)

EVENT_INTERRUPTED = "run.interrupted"
EVENT_SUCCESS = "run.success"
EVENT_ERROR = "run.error"


def _secret() -> bytes:
    return (settings.HITL_WEBHOOK_SECRET or settings.SECRET_KEY).encode()


def sign(body: bytes, timestamp: int, secret: bytes | None = None) -> str:
    """The X-HITL-Signature header value for a body sent at `timestamp`."""
    digest = hmac.new(
        secret or _secret(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(
    body: bytes, header: str, *, secret: bytes | None = None, tolerance: float = 300
) -> bool:
    """Check a signature header the way a receiver should (constant-time, fresh)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign(body, timestamp, secret), header)


def _interrupt_json(row: HumanInterrupt) -> dict[str, Any]:
    return {
        "id": str(row.pk),
        "interrupt_id": row.interrupt_id,
        "position": row.position,
        "kind": row.kind,
        "action_request": {"action": row.action, "args": row.args},
        "allowed": row.allowed_types,
        "description": row.description,
        "value": row.raw_value,
    }


def _payload(run: Run, event: str) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "event": event,
        "run_id": str(run.pk),
        "thread_id": str(run.thread_id),
        "status": run.status,
        "metadata": run.metadata,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
    if event == EVENT_INTERRUPTED:
        rows = HumanInterrupt.objects.filter(run=run).order_by("interrupt_id", "position")
        payload["interrupts"] = [_interrupt_json(row) for row in rows]
    elif event == EVENT_SUCCESS:
        payload["values"] = run.result
        payload["final_result"] = run.final_result
    else:
        # The exception type and message, without the stack or server paths.
        payload["error"] = error_line(run.error)
    return payload


def on_run_ended(event: RunEnded) -> None:
    delivery_create(run=event["run"])


def delivery_create(*, run: Run) -> WebhookDelivery | None:
    """Record a delivery for the run's current outcome and send it after commit."""
    if not run.webhook:
        return None
    if run.status == Run.Status.INTERRUPTED:
        event = EVENT_INTERRUPTED
    elif run.status == Run.Status.SUCCESS:
        event = EVENT_SUCCESS
    elif run.status == Run.Status.ERROR:
        event = EVENT_ERROR
    else:
        return None
    delivery = WebhookDelivery.objects.create(
        run=run, event=event, url=run.webhook, payload=_payload(run, event)
    )
    delivery_id = delivery.pk
    transaction.on_commit(lambda: _send_later(delivery_id))
    return delivery


def _send_later(delivery_id: Any, countdown: float = 0) -> None:
    if settings.HITL_EXECUTOR == "celery":
        try:
            webhook_deliver.apply_async(args=[str(delivery_id)], countdown=countdown, retry=False)
        except Exception:  # the row stays pending; the failure is logged, the run unaffected
            log.exception("could not enqueue webhook delivery %s", delivery_id)
        return
    # Embedded and manual executors have no broker: deliver on a daemon thread.
    timer = threading.Timer(countdown, _deliver_in_thread, args=[str(delivery_id)])
    timer.daemon = True
    timer.start()


def _deliver_in_thread(delivery_id: str) -> None:
    close_old_connections()
    try:
        retry_in = delivery_attempt(delivery_id=delivery_id)
    finally:
        close_old_connections()
    if retry_in is not None:
        _send_later(delivery_id, retry_in)


def backoff(attempts: int) -> float:
    """Seconds before the next try after `attempts` failed ones: base * 2^(n-1), capped."""
    return min(settings.HITL_WEBHOOK_BACKOFF_SECONDS * 2 ** max(attempts - 1, 0), 3600.0)


def delivery_attempt(*, delivery_id: Any) -> float | None:
    """POST one delivery once. Returns seconds until the next try, or None when done."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING)
            .first()
        )
        if delivery is None:  # delivered, failed for good, or another worker holds it
            return None
        delivery.attempts += 1
        body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
        error, status = "", None
        try:
            webhook_check_url(delivery.url)  # the allow-list may have changed since
            request = urllib.request.Request(
                delivery.url,
                data=body,
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "User-Agent": "hitl-webhooks/1",
                    "X-HITL-Event": delivery.event,
                    "X-HITL-Delivery": str(delivery.pk),
                    "X-HITL-Signature": sign(body, int(time.time())),
                },
            )
            # The lock is held during the POST so two workers never send one delivery
            # twice at once; the timeout bounds it.
            with urllib.request.urlopen(request, timeout=settings.HITL_WEBHOOK_TIMEOUT) as resp:
                status = resp.status
        except WebhookNotAllowed as exc:
            error = str(exc)
            delivery.attempts = max(delivery.attempts, settings.HITL_WEBHOOK_MAX_ATTEMPTS)
        except urllib.error.HTTPError as exc:
            status, error = exc.code, f"HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        delivery.response_status = status
        if status is not None and 200 <= status < 300:
            delivery.status = WebhookDelivery.Status.DELIVERED
            delivery.delivered_at = timezone.now()
            delivery.last_error = ""
            retry_in = None
        else:
            delivery.last_error = (error or f"HTTP {status}")[:2000]
            if delivery.attempts >= settings.HITL_WEBHOOK_MAX_ATTEMPTS:
                delivery.status = WebhookDelivery.Status.FAILED
                retry_in = None
            else:
                retry_in = backoff(delivery.attempts)
        delivery.save(
            update_fields=["attempts", "status", "response_status", "last_error", "delivered_at"]
        )
    if retry_in is None and delivery.status == WebhookDelivery.Status.FAILED:
        log.warning("webhook delivery %s failed for good: %s", delivery.pk, delivery.last_error)
    return retry_in


@shared_task(
    name="hitl.webhooks.webhook_deliver",  # the name predates the layout
    bind=True,
    acks_late=True,
    max_retries=None,
    time_limit=120,
    soft_time_limit=90,
)
def webhook_deliver(self, delivery_id: str) -> str:
    """Try one webhook delivery (ids only, JSON); reschedule itself with backoff."""
    close_old_connections()
    retry_in = delivery_attempt(delivery_id=delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)
    return "done"
