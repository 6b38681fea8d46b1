"""Notifications outside the browser: e-mail and Slack-compatible webhooks.

A new pending interrupt (core's interrupt.pending event, subscribed in hitl/ops/apps.py)
joins one *collecting* Notification per destination (a member's e-mail or webhook, the
group's own addresses). The message goes out at its `send_after`: a short batching
delay, then no sooner than the destination's digest window allows and not inside its
quiet hours. So 50 interrupts from one fan-out become one digest.

Sending is the `notification_deliver` Celery task (ids only), retried with exponential
backoff until HITL_NOTIFY_MAX_ATTEMPTS; every attempt is logged on the row (admin).
How a message is rendered and sent is its channel's: each package in hitl/integrations/
registers a `Channel` under its name (`channel_register`, from its AppConfig), so this
module names a channel only as data.
"""

from __future__ import annotations

import http.client
import logging
import smtplib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, close_old_connections, transaction
from django.utils import timezone

from hitl.core.access import confcache
from hitl.core.access.permissions import user_can_review_all
from hitl.core.later import later
from hitl.core.live.events import InterruptChanged
from hitl.core.models import (
    GroupNotificationSettings,
    HumanInterrupt,
    InterruptReminder,
    Notification,
)
from hitl.core.net.webhook_urls import WebhookNotAllowed
from hitl.ops import notify_messages

log = logging.getLogger(__name__)

STALE_SECONDS = 60.0


@dataclass(frozen=True)
class Channel:
    """How one channel's messages are made and sent (registered by its package)."""

    # (subject, plain text, payload) for the rows; appends one-click tokens it mints.
    render: Callable[[Notification, list[HumanInterrupt], list[str]], tuple[str, str, dict]]
    # Send once; raises on failure (the row is retried with backoff).
    send: Callable[[Notification], None]
    # After rendering, inside the row's transaction: remember what the message lists.
    listed: Callable[[Notification, list[HumanInterrupt]], None] | None = None
    # The sweep's housekeeping: counts for its report.
    sweep: Callable[[datetime], dict[str, int]] | None = None


CHANNELS: dict[str, Channel] = {}


def channel_register(name: str, channel: Channel) -> None:
    """Make `name` (a Notification.Channel value) render and send through `channel`."""
    CHANNELS[name] = channel


@dataclass(frozen=True)
class Destination:
    channel: str
    address: str
    user_id: int | None = None
    group_id: int | None = None
    digest_minutes: int = 0
    quiet: tuple[time, time, str] | None = None  # (start, end, time zone)


def _personal(user, pref, config) -> list[Destination]:
    """A user's own destinations: e-mail and Slack, by their preferences."""
    email_on = pref.email if pref else bool(config and config.email_members)
    digest = pref.digest_minutes if pref else 0
    quiet = None
    if pref and pref.quiet_start is not None and pref.quiet_end is not None:
        quiet = (pref.quiet_start, pref.quiet_end, pref.timezone)
    out = []
    if email_on and user.email:
        out.append(Destination("email", user.email, user.pk, None, digest, quiet))
    if pref and pref.slack_webhook_url:
        out.append(Destination("slack", pref.slack_webhook_url, user.pk, None, digest, quiet))
    return out


def destinations_for(group: Group) -> list[Destination]:
    """Who hears about a pending item of `group`: members by their preferences, users who
    review every group and asked for all of it, then the group's own addresses; one
    destination per address."""
    config = GroupNotificationSettings.objects.filter(group=group).first()
    found: dict[tuple[str, str], Destination] = {}

    def add(dest: Destination) -> None:
        found.setdefault((dest.channel, dest.address.lower()), dest)

    members = group.user_set.filter(is_active=True).select_related("hitl_notify").order_by("pk")
    member_ids = set()
    for user in members:
        member_ids.add(user.pk)
        try:
            pref = user.hitl_notify
        except ObjectDoesNotExist:
            pref = None
        for dest in _personal(user, pref, config):
            add(dest)
    watchers = (
        get_user_model()
        .objects.filter(is_active=True, hitl_notify__all_groups=True)
        .exclude(pk__in=member_ids)
        .select_related("hitl_notify")
        .order_by("pk")
    )
    for user in watchers:
        # The preference counts only while the user may review every group.
        if user_can_review_all(user):
            for dest in _personal(user, user.hitl_notify, None):
                add(dest)
    if config:
        for address in config.addresses():
            add(Destination("email", address, None, group.pk, config.digest_minutes))
        if config.slack_webhook_url:
            add(
                Destination(
                    "slack", config.slack_webhook_url, None, group.pk, config.digest_minutes
                )
            )
    return list(found.values())


def quiet_until(moment: datetime, quiet: tuple[time, time, str] | None) -> datetime:
    """`moment`, or the end of the quiet hours it falls in."""
    if not quiet or quiet[0] == quiet[1]:
        return moment
    start, end, zone = quiet
    local = moment.astimezone(ZoneInfo(zone))
    now = local.time()
    if start < end:
        inside, end_day = start <= now < end, local.date()
    else:  # overnight, e.g. 22:00-07:00
        inside = now >= start or now < end
        end_day = local.date() + timedelta(days=1) if now >= start else local.date()
    if not inside:
        return moment
    return datetime.combine(end_day, end, tzinfo=local.tzinfo).astimezone(moment.tzinfo)


def _send_time(dest: Destination, kind: str, now: datetime) -> datetime:
    if kind == Notification.Kind.REMINDER:
        # About a deadline: no batching, no digest window; but quiet hours hold (what
        # arrives in them goes out when they end, like new items).
        return quiet_until(now, dest.quiet)
    at = now + timedelta(seconds=settings.HITL_NOTIFY_BATCH_SECONDS)
    if dest.digest_minutes:
        last = (
            Notification.objects.filter(
                channel=dest.channel, address=dest.address, status=Notification.Status.SENT
            )
            .order_by("-sent_at")
            .values_list("sent_at", flat=True)
            .first()
        )
        if last:
            at = max(at, last + timedelta(minutes=dest.digest_minutes))
    return quiet_until(at, dest.quiet)


def notification_collect(
    *, dest: Destination, interrupt_id: Any, kind: str = Notification.Kind.PENDING, now=None
) -> Notification:
    """Add an interrupt to the destination's open message (opening one if needed)."""
    now = now or timezone.now()
    for _ in range(3):
        try:
            with transaction.atomic():
                open_one = (
                    Notification.objects.select_for_update()
                    .filter(
                        channel=dest.channel,
                        address=dest.address,
                        kind=kind,
                        status=Notification.Status.COLLECTING,
                    )
                    .first()
                )
                if open_one is not None:
                    if str(interrupt_id) not in open_one.interrupt_ids:
                        open_one.interrupt_ids.append(str(interrupt_id))
                        open_one.save(update_fields=["interrupt_ids"])
                    return open_one
                created = Notification.objects.create(
                    channel=dest.channel,
                    address=dest.address,
                    kind=kind,
                    user_id=dest.user_id,
                    group_id=dest.group_id,
                    interrupt_ids=[str(interrupt_id)],
                    send_after=_send_time(dest, kind, now),
                )
                delay = max((created.send_after - now).total_seconds(), 0)
                transaction.on_commit(partial(_send_later, created.pk, delay))
                return created
        except IntegrityError:  # another process opened it first: join that one
            continue
    raise RuntimeError("could not open a notification")  # pragma: no cover


def on_interrupt_pending(message: InterruptChanged) -> None:
    """Core's interrupt.pending handler (runs after the interrupt committed)."""
    if message.get("change"):  # claimed or released: not new to anyone
        return
    group_id = message.get("reviewer_group_id")
    if group_id is None:
        return
    # Who hears of the group's items changes rarely: a per-process copy (core/confcache).
    destinations = confcache.get(
        f"destinations:{group_id}", lambda: destinations_for(Group(pk=group_id))
    )
    if not destinations:
        return
    still_pending = HumanInterrupt.objects.pending().filter(pk=message["interrupt_id"])
    if not still_pending.exists():
        return
    for dest in destinations:
        notification_collect(dest=dest, interrupt_id=message["interrupt_id"])


def _send_later(notification_id: Any, countdown: float = 0) -> None:
    # A failed send leaves the row; the sweep sends it once the broker is back.
    later(DELIVER_TASK, str(notification_id), countdown=countdown, local=_deliver_here)


def _deliver_here(notification_id: str) -> None:
    """One try in this process (the in-process form of notification_deliver)."""
    retry_in = notification_attempt(notification_id=notification_id)
    if retry_in is not None:
        _send_later(notification_id, retry_in)


def backoff(attempts: int) -> float:
    return min(settings.HITL_NOTIFY_BACKOFF_SECONDS * 2 ** max(attempts - 1, 0), 3600.0)


def _finalize(notification: Notification) -> bool:
    """Render a collecting message from its still-pending items; False if none is left."""
    rows = list(
        HumanInterrupt.objects.pending()
        .select_related("reviewer_group", "thread")
        .filter(pk__in=notification.interrupt_ids)
        .order_by("created_at", "position")
    )
    if not rows:
        notification.status = Notification.Status.SKIPPED
        return False
    notification.interrupt_ids = [str(row.pk) for row in rows]
    channel = CHANNELS[notification.channel]
    tokens: list[str] = []
    subject, text, payload = channel.render(notification, rows, tokens)
    # What goes on the wire keeps its one-click links; the stored copy (admin, the row) does
    # not: the tokens are credentials and exist nowhere but in the sent message.
    notification.wire = (text, payload)
    notification.subject = subject[:300]
    notification.body = notify_messages.hide_tokens(text, tokens)
    notification.payload = notify_messages.hide_tokens(payload, tokens)
    if tokens:
        notification.payload["one_click_links"] = len(tokens)
    notification.status = Notification.Status.PENDING
    if channel.listed is not None:
        channel.listed(notification, rows)
    return True


def _send(notification: Notification) -> None:
    CHANNELS[notification.channel].send(notification)


def notification_attempt(*, notification_id: Any, now: datetime | None = None) -> float | None:
    """Send one notification once (when due). Returns seconds until the next try, or None."""
    now = now or timezone.now()
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update(skip_locked=True)
            .filter(
                pk=notification_id,
                status__in=[Notification.Status.COLLECTING, Notification.Status.PENDING],
            )
            .first()
        )
        if notification is None:  # sent, failed, skipped, or another worker holds it
            return None
        collecting = notification.status == Notification.Status.COLLECTING
        if collecting and notification.send_after > now:
            return (notification.send_after - now).total_seconds()
        # A retry of a message with one-click links renders it again: the first attempt's
        # tokens were never stored, so it mails fresh links (for the items still pending).
        if (collecting or notification.payload.get("one_click_links")) and not _finalize(
            notification
        ):
            notification.save(update_fields=["status", "interrupt_ids"])
            return None
        notification.attempts += 1
        error = ""
        try:
            # The row stays locked while sending, so two workers never send it twice.
            _send(notification)
        except WebhookNotAllowed as exc:
            error = str(exc)
            notification.attempts = max(notification.attempts, settings.HITL_NOTIFY_MAX_ATTEMPTS)
        except (smtplib.SMTPException, http.client.HTTPException, OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:2000]
        notification.attempt_log.append(
            {"at": timezone.now().isoformat(), "ok": not error, "error": error}
        )
        retry_in = None
        if not error:
            notification.status = Notification.Status.SENT
            notification.sent_at = timezone.now()
            notification.last_error = ""
        else:
            notification.last_error = error
            if notification.attempts >= settings.HITL_NOTIFY_MAX_ATTEMPTS:
                notification.status = Notification.Status.FAILED
            else:
                retry_in = backoff(notification.attempts)
        notification.save()
    if notification.status == Notification.Status.FAILED:
        log.warning("notification %s failed for good: %s", notification.pk, error)
    return retry_in


DELIVER_TASK = "hitl.notify.deliver"


@shared_task(
    name=DELIVER_TASK,
    bind=True,
    acks_late=True,
    max_retries=None,
    time_limit=120,
    soft_time_limit=90,
)
def notification_deliver(self, notification_id: str) -> str:
    """Send one notification when due (ids only, JSON); reschedule itself with backoff."""
    close_old_connections()
    retry_in = notification_attempt(notification_id=notification_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)
    return "done"


# --- the sweep: reminders before expiry, and messages whose timer was lost ----------------


def remind_due(*, now: datetime | None = None, limit: int = 200) -> int:
    """Remind each expiring item's group once per escalation step."""
    if not settings.HITL_NOTIFY_REMIND_BEFORE:
        return 0
    now = now or timezone.now()
    soon = now + timedelta(seconds=settings.HITL_NOTIFY_REMIND_BEFORE)
    rows = list(
        HumanInterrupt.objects.pending()
        .filter(expires_at__gt=now, expires_at__lte=soon, reviewer_group__isnull=False)
        .select_related("reviewer_group")
        .order_by("expires_at")[:limit]
    )
    done = 0
    for row in rows:
        try:
            with transaction.atomic():
                InterruptReminder.objects.create(
                    interrupt=row, escalation_count=row.escalation_count
                )
                for dest in destinations_for(row.reviewer_group):
                    notification_collect(
                        dest=dest, interrupt_id=row.pk, kind=Notification.Kind.REMINDER, now=now
                    )
        except IntegrityError:  # reminded already (or by a concurrent sweep)
            continue
        done += 1
    return done


def notify_sweep(*, now: datetime | None = None) -> dict[str, int]:
    now = now or timezone.now()
    reminded = remind_due(now=now)
    # Messages whose timer or task was lost (a restart, a broker outage).
    stale = now - timedelta(seconds=STALE_SECONDS)
    lost = list(
        Notification.objects.filter(
            status=Notification.Status.COLLECTING, send_after__lte=stale
        ).values_list("pk", flat=True)[:200]
    ) + list(
        Notification.objects.filter(
            status=Notification.Status.PENDING, attempts=0, created_at__lte=stale
        ).values_list("pk", flat=True)[:200]
    )
    for pk in lost:
        _send_later(pk)
    done = {"reminded": reminded, "resent": len(lost)}
    for channel in CHANNELS.values():
        if channel.sweep is not None:
            done.update(channel.sweep(now))
    return done


@shared_task(name="hitl.notify.sweep", ignore_result=True, time_limit=120)
def notify_sweep_task() -> dict[str, int]:
    close_old_connections()
    return notify_sweep()
