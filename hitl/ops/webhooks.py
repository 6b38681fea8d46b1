"""Run webhooks: a signed JSON POST when a run pauses on interrupts and when it ends.

`delivery_create` runs inside the transaction that records the run's outcome
(core's run.ended event, subscribed in hitl/ops/apps.py), so a delivery row exists exactly when the outcome
does; the POST itself happens after commit, in the `webhook_deliver` Celery task,
retried with exponential backoff until HITL_WEBHOOK_MAX_ATTEMPTS. Every attempt is
recorded on the WebhookDelivery row (visible in admin).

Bodies are signed per the Standard Webhooks spec (`webhook-id`, `webhook-timestamp`,
`webhook-signature`), so receivers verify them with the `standardwebhooks` library (or
any implementation of the spec) and the secret `receiver_secret()` prints. The older
`X-HITL-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, f"{t}.{body}")>` is still sent.

The POST goes to the address the host resolved to when it was checked (never a second
lookup), and redirects are not followed: a 3xx is a failed attempt.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import logging
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from hitl.core.errors import error_line
from hitl.core.later import later
from hitl.core.live.agui import jsonable
from hitl.core.live.events import RunEnded
from hitl.core.models import HumanInterrupt, Run, WebhookDelivery
from hitl.core.net.webhook_urls import WebhookNotAllowed
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from hitl.ops.outbound import guarded_post

log = logging.getLogger(__name__)

EVENT_INTERRUPTED = "run.interrupted"
EVENT_SUCCESS = "run.success"
EVENT_ERROR = "run.error"


_WHSEC = "whsec_"


def _secret() -> bytes:
    """The signing key: a `whsec_<base64>` setting decoded, any other text as UTF-8."""
    raw = settings.HITL_WEBHOOK_SECRET or settings.SECRET_KEY
    if raw.startswith(_WHSEC):
        return base64.b64decode(raw[len(_WHSEC) :] + "==")
    return raw.encode()


def receiver_secret() -> str:
    """The secret receivers give a Standard Webhooks verifier: `whsec_<base64 key>`."""
    return _WHSEC + base64.b64encode(_secret()).decode()


def standard_headers(delivery_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The Standard Webhooks headers for one attempt; the id stays the same on retries."""
    signature = Webhook(_secret()).sign(
        msg_id=delivery_id, timestamp=datetime.fromtimestamp(timestamp, UTC), data=body.decode()
    )
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


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


def _iso(moment) -> str | None:
    return moment.isoformat() if moment else None


def _values_at_pause(run: Run) -> Any:
    """The thread's state values at the run's pause (a paused run keeps no result)."""
    try:
        graph = registry.get(run.thread.graph, checkpointer())
        config = {"configurable": {"thread_id": str(run.thread_id), "checkpoint_ns": ""}}
        return jsonable(graph.get_state(config).values)
    except Exception as exc:  # the POST still says what happened; values are extra
        log.warning("run %s: no values for its webhook (%s)", run.pk, exc)
        return None


def _payload(run: Run, event: str) -> dict[str, Any]:
    """LangGraph Server's webhook body (the run, its status, times and the thread's
    values), plus HITL's `event`, and the pending `interrupts` of a pause."""
    kwargs: dict[str, Any] = {"config": run.config or {}, "context": run.context or {}}
    if run.kind == Run.Kind.RESUME:
        kwargs.update(input=None, command={"resume": run.input.get("resume"), **run.command})
    else:
        kwargs.update(input=run.input, command=run.command or None)
    payload: dict[str, Any] = {
        "event": event,
        "run_id": str(run.pk),
        "thread_id": str(run.thread_id),
        "status": run.status,
        "metadata": run.metadata,
        "kwargs": kwargs,
        "multitask_strategy": run.multitask_strategy or "reject",
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.finished_at or run.started_at or run.created_at),
        "run_started_at": _iso(run.started_at),
        "run_ended_at": _iso(run.finished_at),
        "finished_at": _iso(run.finished_at),
    }
    if event == EVENT_INTERRUPTED:
        rows = HumanInterrupt.objects.filter(run=run).order_by("interrupt_id", "position")
        payload["interrupts"] = [_interrupt_json(row) for row in rows]
        payload["values"] = _values_at_pause(run)
    elif event == EVENT_SUCCESS:
        payload["values"] = run.result
        payload["final_result"] = run.final_result
    else:
        # The exception type and message, without the stack or server paths.
        payload["error"] = error_line(run.error)
        payload["values"] = None
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
    transaction.on_commit(partial(_send_later, delivery.pk))
    return delivery


def _send_later(delivery_id: Any, countdown: float = 0) -> None:
    # A failed send leaves the row pending; the failure is logged, the run unaffected.
    later(DELIVER_TASK, str(delivery_id), countdown=countdown, local=_deliver_here)


def _deliver_here(delivery_id: str) -> None:
    """One try in this process (the in-process form of webhook_deliver)."""
    retry_in = delivery_attempt(delivery_id=delivery_id)
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
        payload = {**delivery.payload, "webhook_sent_at": timezone.now().isoformat()}
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        error, status = "", None
        try:
            # Checked again: the allow-list may have changed, and the name may now
            # resolve elsewhere.
            now = int(time.time())
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "hitl-webhooks/1",
                "X-HITL-Event": delivery.event,
                "X-HITL-Delivery": str(delivery.pk),
                "X-HITL-Signature": sign(body, now),
                **standard_headers(str(delivery.pk), body, now),
            }
            # The lock is held during the POST so two workers never send one delivery
            # twice at once; the timeout bounds it.
            status = guarded_post(delivery.url, body, headers)
            if 300 <= status < 400:
                error = f"HTTP {status}: redirects are not followed"
            elif not 200 <= status < 300:
                error = f"HTTP {status}"
        except WebhookNotAllowed as exc:
            error = str(exc)
            delivery.attempts = max(delivery.attempts, settings.HITL_WEBHOOK_MAX_ATTEMPTS)
        except (http.client.HTTPException, OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
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


DELIVER_TASK = "hitl.webhooks.webhook_deliver"  # the name predates the layout


@shared_task(
    name=DELIVER_TASK,
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
