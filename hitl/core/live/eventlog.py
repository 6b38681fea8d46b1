"""A short replayable log of each thread's stream events (Redis streams), so an SSE client
that reconnects after a web restart resumes from its Last-Event-ID.

The worker appends every thread event it publishes (the entry id travels with the
live message as `seq`); a web process replays the entries after a client's last id,
then goes on live. Only with Redis (the embedded server has one process: nothing to
survive). Entries expire an hour after the thread's last event.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from hitl.core.live import redis

log = logging.getLogger(__name__)

TTL_SECONDS = 3600
MAX_ENTRIES = 5000


enabled = redis.enabled


def _key(thread_id: Any) -> str:
    return f"hitl:eventlog:{thread_id}"


def _resumable_key(thread_id: Any) -> str:
    return f"hitl:resumable:{thread_id}"


def _expected_key(thread_id: Any) -> str:
    return f"hitl:expected:{thread_id}"


def expect_listener(thread_id: Any, seconds: float) -> bool:
    """Mark the thread as about to be watched for `seconds`; False without Redis."""
    if not enabled():
        return False
    try:
        redis.client().set(_expected_key(thread_id), "1", px=int(seconds * 1000))
    except Exception as exc:  # the page then gets the run's events from its next step
        log.warning("could not mark thread %s as watched: %s", thread_id, exc)
    return True


def append(thread_id: Any, event: dict[str, Any]) -> str | None:
    """Log one event; its entry id, or None without Redis (or when Redis is down)."""
    if not enabled():
        return None
    try:
        client = redis.client()
        key = _key(thread_id)
        entry = client.xadd(key, {"e": json.dumps(event)}, maxlen=MAX_ENTRIES, approximate=True)
        client.expire(key, TTL_SECONDS)
        return entry.decode() if isinstance(entry, bytes) else str(entry)
    except Exception as exc:  # a live stream still works; only resuming would not
        log.warning("could not log a stream event of thread %s: %s", thread_id, exc)
        return None


def read_from(thread_id: Any, entry_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The logged events from `entry_id` (inclusive) on, oldest first."""
    if not enabled() or not is_entry_id(entry_id):
        return []
    rows = redis.client().xrange(_key(thread_id), min=entry_id, max="+")
    return [(_text(entry), _event(fields)) for entry, fields in rows]


def read_back(thread_id: Any, entry_id: str, count: int) -> list[tuple[str, dict[str, Any]]]:
    """Up to `count` logged events up to `entry_id` (inclusive), newest first."""
    if not enabled() or not is_entry_id(entry_id):
        return []
    rows = redis.client().xrevrange(_key(thread_id), max=entry_id, min="-", count=count)
    return [(_text(entry), _event(fields)) for entry, fields in rows]


def _text(entry: Any) -> str:
    return entry.decode() if isinstance(entry, bytes) else str(entry)


def _event(fields: dict[Any, Any]) -> dict[str, Any]:
    return json.loads(fields[b"e"] if b"e" in fields else fields["e"])


def is_entry_id(value: Any) -> bool:
    parts = str(value).split("-")
    return len(parts) == 2 and all(p.isdigit() for p in parts)


def order(entry_id: str) -> tuple[int, int]:
    ms, _, n = entry_id.partition("-")
    return int(ms), int(n)


def mark_resumable(thread_id: Any, run_id: Any, modes: list[str]) -> None:
    """Keep logging this thread's events while no one listens (a client may come back),
    and remember the stream modes a reconnect (a GET without them) should get."""
    if not enabled():
        return
    client = redis.client()
    client.set(_resumable_key(thread_id), "1", ex=TTL_SECONDS)
    client.set(f"hitl:streammodes:{run_id}", json.dumps(modes), ex=TTL_SECONDS)


def stream_listened(group_key: Any, since: int, thread_id: Any) -> bool:
    """Whether the channel-layer group under `group_key` has a member joined since `since`,
    or the thread has a resumable stream or a page about to open: one round trip. When
    unsure: yes."""
    try:
        pipe = redis.client().pipeline(transaction=False)
        pipe.zcount(group_key, since, "+inf")
        pipe.exists(_resumable_key(thread_id), _expected_key(thread_id))
        members, marks = pipe.execute()
    except Exception:
        return True
    return members > 0 or bool(marks)


def is_resumable(thread_id: Any) -> bool:
    if not enabled():
        return False
    try:
        return bool(redis.client().exists(_resumable_key(thread_id), _expected_key(thread_id)))
    except Exception:
        return True  # when unsure, keep streaming (as groups_listened does)


def saved_modes(run_id: Any) -> list[str] | None:
    if not enabled():
        return None
    raw = redis.client().get(f"hitl:streammodes:{run_id}")
    return json.loads(raw) if raw else None
