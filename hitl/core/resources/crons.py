"""Crons: runs started on a schedule (cron syntax, read by croniter), on one thread or
on a new thread each time. Beat (or the embedded sweeper) calls `crons_fire`; each
tick of a cron starts at most one run, however many beats or workers call it."""

from __future__ import annotations

import logging
import uuid
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from croniter import CroniterBadDateError, croniter
from django.db import IntegrityError, transaction
from django.utils import timezone as dj_timezone

from hitl.core import audit
from hitl.core.access.permissions import (
    cron_list_for_user,
    user_can_run_thread,
    user_can_start_runs,
    user_can_view_thread,
)
from hitl.core.db.retry import retry_transient
from hitl.core.errors import Forbidden, Invalid, NotFound, ServiceError, check_storable
from hitl.core.models import Cron, CronFire, Thread
from hitl.core.net.webhook_urls import WebhookNotAllowed, webhook_check_url
from hitl.core.resources.assistants import assistant_get
from hitl.core.runs.config import run_config_merge
from hitl.core.runs.graphs import thread_graph_check
from hitl.core.runs.options import RunOptions
from hitl.core.runs.start import run_start

log = logging.getLogger(__name__)

FIRE_BATCH = 100


def _zone(name: Any) -> zoneinfo.ZoneInfo | None:
    if name in (None, ""):
        return None
    if not isinstance(name, str) or len(name) > 64:
        raise Invalid("timezone must be an IANA name such as 'Europe/Berlin'.")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise Invalid(f"Unknown timezone {name!r}.") from None


def check_schedule(schedule: Any) -> str:
    if not isinstance(schedule, str) or not schedule.strip() or len(schedule) > 200:
        raise Invalid("schedule must be a cron expression such as '*/5 * * * *'.")
    if not croniter.is_valid(schedule):
        raise Invalid(f"Invalid cron schedule {schedule!r}.")
    return schedule.strip()


def next_tick(schedule: str, zone_name: str, after: datetime) -> datetime:
    """The first tick of `schedule` (read in `zone_name`, else UTC) after `after`, in UTC."""
    zone = _zone(zone_name) or UTC
    try:
        return croniter(schedule, after.astimezone(zone)).get_next(datetime).astimezone(UTC)
    except CroniterBadDateError:
        # Valid syntax that names no real date (31 February): croniter finds no tick.
        raise Invalid(
            f"Cron schedule {schedule!r} never fires: no date matches it "
            "(a day that month never has, such as 31 February)."
        ) from None


def _check_payload(payload: dict[str, Any]) -> dict[str, Any]:
    check_storable(payload, "The cron's run")
    run_input = payload.get("input")
    if run_input is not None and not isinstance(run_input, dict):
        raise Invalid("input must be a JSON object.")
    # What a run's config and context may be; the assistant's go under them at each tick.
    run_config_merge(config=payload.get("config"), context=payload.get("context"))
    metadata = payload.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise Invalid("metadata must be a JSON object.")
    if payload.get("webhook"):
        try:
            webhook_check_url(payload["webhook"])
        except WebhookNotAllowed as exc:
            raise Invalid(str(exc)) from None
    return payload


@dataclass(frozen=True)
class CronTerms:
    """When a cron fires besides its schedule, and what it is labelled with."""

    timezone: str | None = None
    end_time: datetime | None = None
    enabled: bool = True
    metadata: dict[str, Any] | None = None


def cron_create(
    *,
    user,
    assistant_id: str,
    schedule: Any,
    payload: dict[str, Any],
    thread_id: uuid.UUID | None = None,
    terms: CronTerms = CronTerms(),
) -> Cron:
    """Schedule runs of an assistant: on `thread_id` (which the user may run), or on a
    new thread each time."""
    timezone, end_time, enabled, metadata = (
        terms.timezone,
        terms.end_time,
        terms.enabled,
        terms.metadata,
    )
    assistant = assistant_get(assistant_id)
    schedule = check_schedule(schedule)
    _zone(timezone)
    payload = _check_payload({**payload, "assistant_id": assistant.assistant_id})
    check_storable(metadata, "metadata")
    thread = None
    if thread_id is not None:
        thread = Thread.objects.filter(pk=thread_id).first()
        if thread is None or not user_can_view_thread(user, thread):
            raise NotFound(f"Thread {thread_id} not found.")
        if not user_can_run_thread(user, thread):
            raise Forbidden(
                "Only the thread's requester (or a user with the hitl.run_any_thread "
                "permission) can schedule runs on it."
            )
        thread_graph_check(thread=thread, graph=assistant.graph)
    now = dj_timezone.now()
    with transaction.atomic():
        cron = Cron.objects.create(
            assistant_id=assistant.assistant_id,
            thread=thread,
            schedule=schedule,
            timezone=timezone or "",
            payload=payload,
            metadata=metadata or {},
            next_run_date=next_tick(schedule, timezone or "", now),
            end_time=end_time,
            enabled=enabled,
            user=user if user is not None and user.is_authenticated else None,
        )
        audit.audit_record(
            kind=audit.Kind.CRON_CREATED,
            thread=thread,
            actor=user,
            data={"cron_id": str(cron.pk), "schedule": schedule, "assistant_id": cron.assistant_id},
        )
    return cron


def cron_for_user(user, cron_id: Any) -> Cron:
    try:
        pk = uuid.UUID(str(cron_id))
    except ValueError:
        raise NotFound(f"Cron {cron_id} not found.") from None
    cron = cron_list_for_user(user).filter(pk=pk).first()
    if cron is None:
        raise NotFound(f"Cron {cron_id} not found.")
    return cron


def cron_update(
    *,
    user,
    cron_id: Any,
    schedule: Any = None,
    timezone: Any = None,
    end_time: datetime | None = None,
    enabled: bool | None = None,
    payload: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Cron:
    with transaction.atomic():
        cron = cron_for_user(user, cron_id)
        cron = Cron.objects.select_for_update().get(pk=cron.pk)
        if schedule is not None:
            cron.schedule = check_schedule(schedule)
        if timezone is not None:
            _zone(timezone)
            cron.timezone = timezone
        if schedule is not None or timezone is not None:
            cron.next_run_date = next_tick(cron.schedule, cron.timezone, dj_timezone.now())
        if end_time is not None:
            cron.end_time = end_time
        if enabled is not None:
            cron.enabled = enabled
        if payload:
            cron.payload = _check_payload({**cron.payload, **payload})
        if metadata is not None:
            check_storable(metadata, "metadata")
            cron.metadata = {**cron.metadata, **metadata}
        cron.save()
    return cron


def cron_delete(*, user, cron_id: Any) -> None:
    with transaction.atomic():
        cron = cron_for_user(user, cron_id)
        audit.audit_record(
            kind=audit.Kind.CRON_DELETED,
            thread=cron.thread_id,
            actor=user,
            data={"cron_id": str(cron.pk)},
        )
        cron.delete()


def crons_fire(*, now: datetime | None = None, limit: int = FIRE_BATCH) -> int:
    """Start the runs of every due cron; returns how many started."""
    now = now or dj_timezone.now()
    due = list(
        Cron.objects.filter(enabled=True, next_run_date__lte=now)
        .order_by("next_run_date")
        .values_list("pk", flat=True)[:limit]
    )
    return sum(_fire(pk, now) for pk in due)


@retry_transient
def _fire(pk: uuid.UUID, now: datetime) -> int:
    """Fire one due cron's tick: in one transaction, move it to its next tick, record the
    fire (unique per tick) and start the run. A second beat either skips the locked row,
    finds it moved on, or fails the unique fire of the same tick: never a second run."""
    with transaction.atomic():
        cron = (
            Cron.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("user", "thread")
            .filter(pk=pk, enabled=True, next_run_date__lte=now)
            .first()
        )
        if cron is None:
            return 0
        refused = _owner_refusal(cron)
        if refused:
            # The cron acts with its owner's rights at each tick: once they are gone it
            # stops for good (re-enabling it is a deliberate act), and says why.
            cron.enabled = False
            cron.save(update_fields=["enabled", "updated_at"])
            audit.audit_record(
                kind=audit.Kind.CRON_DISABLED,
                thread=cron.thread_id,
                actor=cron.user,
                data={
                    "cron_id": str(cron.pk),
                    "scheduled_for": cron.next_run_date,
                    "reason": refused,
                },
            )
            log.warning("cron %s stopped: %s", cron.pk, refused)
            return 0
        tick = cron.next_run_date
        # Ticks missed while no beat ran are not made up: the next one after now.
        following = next_tick(cron.schedule, cron.timezone, max(now, tick))
        moved = Cron.objects.filter(pk=pk, next_run_date=tick).update(
            next_run_date=following,
            enabled=not (cron.end_time is not None and following > cron.end_time),
        )
        if not moved:
            return 0
        try:
            with transaction.atomic():
                fire = CronFire.objects.create(cron=cron, scheduled_for=tick)
        except IntegrityError:
            return 0  # another beat fired this tick
        run, skipped = None, ""
        try:
            run = _start(cron)
        except ServiceError as exc:
            skipped = str(exc)
            log.info("cron %s: tick %s skipped: %s", cron.pk, tick, exc)
        if run is not None:
            fire.run = run
            fire.save(update_fields=["run"])
        audit.audit_record(
            kind=audit.Kind.CRON_FIRED,
            thread=run.thread_id if run is not None else cron.thread_id,
            run=run,
            actor=cron.user,
            data={"cron_id": str(cron.pk), "scheduled_for": tick, "skipped": skipped},
        )
    return 1 if run is not None else 0


def _owner_refusal(cron: Cron) -> str:
    """Why the cron's owner may no longer start its runs ("" when they may)."""
    if cron.user_id is None:
        return ""  # made without an account: nobody's rights to lose
    if not user_can_start_runs(cron.user):
        return "its owner's account is no longer active"
    if cron.thread is not None and not user_can_run_thread(cron.user, cron.thread):
        return "its owner may no longer start runs on its thread"
    return ""


def _thread_metadata(cron: Cron, assistant) -> dict[str, Any]:
    metadata = {"cron_id": str(cron.pk), "graph_id": assistant.graph}
    if not assistant.is_default:
        metadata["assistant_id"] = assistant.assistant_id
    return metadata


def _start(cron: Cron):
    payload = cron.payload or {}
    assistant = assistant_get(cron.assistant_id)
    run_config, run_context = run_config_merge(
        config=payload.get("config"),
        context=payload.get("context"),
        assistant_config=assistant.config,
        assistant_context=assistant.context,
    )
    with transaction.atomic():  # a refusal undoes only the run's start, not the tick
        return run_start(
            graph=assistant.graph,
            input=payload.get("input") or {},
            user=cron.user,
            thread=cron.thread,
            title=f"{assistant.name} (cron)",
            metadata=None if cron.thread_id else _thread_metadata(cron, assistant),
            options=RunOptions(
                metadata={**(payload.get("metadata") or {}), "cron_id": str(cron.pk)},
                webhook=payload.get("webhook") or "",
                config=run_config,
                context=run_context,
                assistant_id="" if assistant.is_default else assistant.assistant_id,
                assistant_version=None if assistant.is_default else assistant.version,
            ),
        )
