"""Typed live events, published once the change they announce commits
(send_event_on_commit), and the in-process domain events rooms above core subscribe to.

Thread groups carry the AG-UI event vocabulary (RUN_STARTED, RUN_FINISHED, ...);
inbox groups carry interrupt changes. Consumers forward them after a permission check.
The groups and who listens to them are hitl.core.live.listeners'; delivery is
hitl.core.live.publisher's.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from channels.layers import get_channel_layer
from django.db import transaction

from hitl.compat import channels_redis
from hitl.core.errors import is_transient
from hitl.core.live import eventlog
from hitl.core.live.listeners import (
    INBOX_ALL,
    inbox_group,
    layer_on_log_redis,
    own_inbox_group,
    thread_group,
    thread_status_group,
    thread_stream_listened,
    user_group,
)
from hitl.core.live.publisher import publish

log = logging.getLogger(__name__)


class ThreadEvent(TypedDict):
    """An AG-UI event on a thread stream, wrapped for the channel layer."""

    type: Literal["thread.event"]
    thread_id: str
    event: dict[str, Any]
    # The event's id in the thread's replayable log (hitl.core.live.eventlog), when logged.
    seq: NotRequired[str]


class InterruptChanged(TypedDict):
    """An interrupt was created, answered, expired, cancelled or reassigned."""

    type: Literal["interrupt.changed"]
    thread_id: str
    interrupt_id: str
    reviewer_group_id: int | None
    status: str
    responded_by: NotRequired[str]
    # A pending item that changed without being new (claimed, released): rows and cards
    # are re-rendered, nobody is notified again.
    change: NotRequired[str]
    # Added by INTERRUPT_PENDING handlers: the inbox row and a plain-text notification.
    html: NotRequired[str]
    notify: NotRequired[dict[str, str]]


class InterruptSnoozed(TypedDict):
    """A reviewer set a pending item aside ("not now") or took it back, perhaps in
    another tab: only their own pages list it differently."""

    type: Literal["interrupt.snoozed"]
    interrupt_id: str
    snoozed: bool


class InterruptProgress(TypedDict):
    """A four-eyes interrupt got an approval but is still pending (e.g. 1 of 2)."""

    type: Literal["interrupt.progress"]
    thread_id: str
    interrupt_id: str
    reviewer_group_id: int | None
    approvals: int
    required: int
    approvers: list[str]
    edited: bool


class RunEnd(TypedDict):
    """How a run ended, for waiters: enough to answer without reading it back."""

    run_id: str
    status: str
    values: Any
    # The run's pending interrupts, one per LangGraph interrupt id, ordered by it.
    interrupts: list[dict[str, Any]]


class ThreadChanged(TypedDict):
    type: Literal["thread.changed"]
    thread_id: str
    status: str
    requester_id: int | None
    # A run of the thread ended (the status alone may say busy: a rule resumed it).
    run_ended: NotRequired[bool]
    # Only on the copy sent to the thread's status group (waiters), when small.
    run_end: NotRequired[RunEnd]


def publish_thread_event(thread_id: Any, event: dict[str, Any]) -> None:
    publish_thread_events(thread_id, [event])


def publish_thread_events(thread_id: Any, batch: list[dict[str, Any]]) -> bool:
    """Log a batch of the thread's stream events and send them to its group; whether
    the group had a member (True when not counted).

    With the layer on the event log's Redis, one round trip logs them and counts the
    group's members; when it has none they are not sent (a stream that subscribes
    later reads them from the log)."""
    seqs, heard = eventlog.append_all(thread_id, batch, _thread_members(thread_id))
    return _send_logged(thread_id, batch, seqs, heard)


def publish_run_started(thread_id: Any, event: dict[str, Any]) -> bool:
    """Log and send a run's RUN_STARTED; whether anyone listens to the thread's full
    stream, as thread_stream_listened answers, asked in the same round trip where the
    log can count the group's members."""
    group = _thread_members(thread_id)
    if group is None:
        publish_thread_events(thread_id, [event])
        return thread_stream_listened(thread_id)
    seqs, heard, listened = eventlog.append_listened(thread_id, [event], group)
    _send_logged(thread_id, [event], seqs, heard)
    return listened


async def apublish_thread_events(thread_id: Any, batch: list[dict[str, Any]]) -> bool:
    """publish_thread_events from an event loop (the run engine's), without a thread hop."""
    seqs, heard = await eventlog.aappend_all(thread_id, batch, _thread_members(thread_id))
    return _send_logged(thread_id, batch, seqs, heard)


# The last member count of each thread's group this process had from the log: a run's
# batches start from what its RUN_STARTED found (see hitl.core.live.batches).
_heard: dict[str, bool] = {}
_HEARD_KEPT = 4096


def last_heard(thread_id: Any) -> bool:
    """Whether the thread's group had a member when this process last logged for it."""
    return _heard.get(str(thread_id), False)


def _thread_members(thread_id: Any) -> tuple[str, int] | None:
    """The group's members key and liveness cutoff, when the log can count them."""
    layer = get_channel_layer()
    if not layer_on_log_redis(layer):
        return None
    group = channels_redis.group_key(layer, thread_group(thread_id))
    return group, channels_redis.live_since(layer)


def _send_logged(
    thread_id: Any, batch: list[dict[str, Any]], seqs: list[str | None], heard: bool
) -> bool:
    if len(_heard) >= _HEARD_KEPT:
        _heard.clear()
    _heard[str(thread_id)] = heard
    if not heard:
        return False
    group = thread_group(thread_id)
    for event, seq in zip(batch, seqs, strict=True):
        message: ThreadEvent = {"type": "thread.event", "thread_id": str(thread_id), "event": event}
        if seq is not None:
            message["seq"] = seq
        publish([group], dict(message))
    return True


# --- in-process domain events ------------------------------------------------------------
#
# Rooms above core (ops: webhooks; later notifications) subscribe here, explicitly, in
# their AppConfig.ready(); core never imports them. Handlers run inside the transaction
# that recorded the change, so what they write (a webhook delivery row) commits with it
# or not at all; anything that leaves the process they defer with transaction.on_commit.

RUN_ENDED = "run.ended"
# Handlers get the InterruptChanged message of a new pending interrupt before it is
# published and may add to it (the review room attaches the inbox row's HTML, rendered
# once in the publishing process rather than in every web process that forwards it).
INTERRUPT_PENDING = "interrupt.pending"
# Every change of an interrupt (answered, undone, claimed, approval progress), after its
# commit: ops updates the Slack messages that list it. Handlers must be cheap and never raise.
INTERRUPT_CHANGED = "interrupt.changed"


class RunEnded(TypedDict):
    """A run paused on interrupts, finished or failed (`run` is the locked Run row)."""

    type: Literal["run.ended"]
    run: Any


_subscribers: dict[str, list[Callable[[Any], None]]] = {}


def subscribe(kind: str, handler: Callable[[Any], None]) -> None:
    handlers = _subscribers.setdefault(kind, [])
    if handler not in handlers:
        handlers.append(handler)


def _notify(kind: str, payload: Any) -> None:
    for handler in _subscribers.get(kind, []):
        handler(payload)


def emit_run_ended(run: Any) -> None:
    event: RunEnded = {"type": "run.ended", "run": run}
    _notify(RUN_ENDED, event)


def publish_interrupt_changed(
    *,
    thread_id: Any,
    interrupt_id: Any,
    reviewer_group_id: int | None,
    status: str,
    responded_by: str = "",
    change: str = "",
) -> None:
    message: InterruptChanged = {
        "type": "interrupt.changed",
        "thread_id": str(thread_id),
        "interrupt_id": str(interrupt_id),
        "reviewer_group_id": reviewer_group_id,
        "status": status,
    }
    if responded_by:
        message["responded_by"] = responded_by
    if change:
        message["change"] = change
    if status == "pending":
        try:
            _notify(INTERRUPT_PENDING, message)
        except Exception as exc:  # consumers render what a handler could not add
            if not is_transient(exc):
                log.exception("interrupt %s: a pending-interrupt handler failed", interrupt_id)
    publish([inbox_group(reviewer_group_id), INBOX_ALL, thread_group(thread_id)], dict(message))
    _notify_changed(message)


def announce_interrupt_released(
    *, thread_id: Any, interrupt_id: Any, reviewer_group_id: int | None
) -> None:
    """A decision's grace period ended: it can no longer be undone. Followers (the Slack
    messages listing it) are told; sockets are not: their pages count the grace down."""
    message: InterruptChanged = {
        "type": "interrupt.changed",
        "thread_id": str(thread_id),
        "interrupt_id": str(interrupt_id),
        "reviewer_group_id": reviewer_group_id,
        "status": "resolved",
        "change": "released",
    }
    _notify_changed(message)


def _notify_changed(message: Any) -> None:
    try:
        _notify(INTERRUPT_CHANGED, message)
    except Exception:  # the change is committed; a follower's failure must not undo it
        log.exception("interrupt %s: a change handler failed", message.get("interrupt_id"))


def publish_interrupt_snoozed(*, user_id: int, interrupt_id: Any, snoozed: bool) -> None:
    message: InterruptSnoozed = {
        "type": "interrupt.snoozed",
        "interrupt_id": str(interrupt_id),
        "snoozed": snoozed,
    }
    publish([own_inbox_group(user_id)], dict(message))


def publish_interrupt_progress(
    *,
    thread_id: Any,
    interrupt_id: Any,
    reviewer_group_id: int | None,
    approvals: int,
    required: int,
    approvers: list[str],
    edited: bool,
) -> None:
    message: InterruptProgress = {
        "type": "interrupt.progress",
        "thread_id": str(thread_id),
        "interrupt_id": str(interrupt_id),
        "reviewer_group_id": reviewer_group_id,
        "approvals": approvals,
        "required": required,
        "approvers": approvers,
        "edited": edited,
    }
    publish([inbox_group(reviewer_group_id), INBOX_ALL, thread_group(thread_id)], dict(message))
    _notify_changed(message)


def publish_thread_changed(
    *,
    thread_id: Any,
    status: str,
    requester_id: int | None,
    run_end: RunEnd | None = None,
    run_ended: bool = False,
) -> None:
    message: ThreadChanged = {
        "type": "thread.changed",
        "thread_id": str(thread_id),
        "status": status,
        "requester_id": requester_id,
    }
    if run_ended:
        message["run_ended"] = True
    groups = [thread_group(thread_id), INBOX_ALL]
    if requester_id is not None:
        groups.append(user_group(requester_id))
    # A receiver in both thread groups gets two copies; the id lets it drop one. The
    # waiters' copy goes first: a hub in both groups keeps the one that carries run_end.
    eid = uuid.uuid4().hex
    # Status-only waiters wait for an end (waiting.is_run_end); a run's start would only
    # wake them for nothing. Whoever waits for "busy" listens on the thread group.
    if status != "busy" or run_ended:
        waiters: dict[str, Any] = {**message, "eid": eid}
        if run_end is not None:
            waiters["run_end"] = run_end
        publish([thread_status_group(thread_id)], waiters)
    publish(groups, {**message, "eid": eid})


def send_event_on_commit(publish_event: Callable[..., None], /, **fields: Any) -> None:
    """Publish once the caller's transaction commits (at once outside one).

    The one way a service announces a change (Zulip's send_event_on_commit): no listener
    hears of a change that rolls back, or before it can read it. `fields` are taken now.
    """
    transaction.on_commit(functools.partial(publish_event, **fields))


_ITS_GROUP: Any = object()


def interrupt_changed_on_commit(
    row: Any,
    status: str,
    *,
    responded_by: str | None = "",
    change: str = "",
    reviewer_group_id: Any = _ITS_GROUP,
) -> None:
    """Announce a change of `row` (a HumanInterrupt) to its reviewers once the caller's
    transaction commits; `reviewer_group_id` names another group than the row's own."""
    send_event_on_commit(
        publish_interrupt_changed,
        thread_id=row.thread_id,
        interrupt_id=row.pk,
        reviewer_group_id=(
            row.reviewer_group_id if reviewer_group_id is _ITS_GROUP else reviewer_group_id
        ),
        status=status,
        responded_by=responded_by or "",
        change=change,
    )


# A run's end rides along to waiters only up to this size (JSON bytes); a bigger state
# is read back from the checkpointer by the waiter instead.
RUN_END_MAX_BYTES = 64 * 1024


def run_end_summary(
    *, run_id: Any, status: str, values: Any, interrupts: list[tuple[str, Any]]
) -> RunEnd | None:
    """What a waiter needs to answer for a run that ended, or None when it is too big."""
    pending: dict[str, dict[str, Any]] = {}
    for interrupt_id, value in sorted(interrupts, key=lambda item: item[0]):
        pending.setdefault(interrupt_id, {"value": value, "id": interrupt_id})
    summary: RunEnd = {
        "run_id": str(run_id),
        "status": status,
        "values": values,
        "interrupts": list(pending.values()),
    }
    try:
        size = len(json.dumps(summary, separators=(",", ":")))
    except (TypeError, ValueError):
        return None
    return summary if size <= RUN_END_MAX_BYTES else None
