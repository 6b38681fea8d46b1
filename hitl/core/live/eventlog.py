"""A short replayable log of each thread's stream events (Redis streams), so an SSE client
that reconnects after a web restart resumes from its Last-Event-ID.

The worker appends every thread event it publishes (the entry id travels with the
live message as `seq`); a web process replays the entries after a client's last id,
then goes on live. Entries expire an hour after the thread's last event.

Without Redis (the embedded default: one process) the log is kept in that process's
memory, bounded the same way: its SSE parts get ids too, and a dropped connection or a
`Last-Event-ID: -1` resumes as it does with Redis.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
import weakref
from typing import Any

from hitl.core.live import redis

log = logging.getLogger(__name__)

TTL_SECONDS = 3600
MAX_ENTRIES = 5000


enabled = redis.enabled


class _MemoryLog:
    """The event log of a process without Redis: the same entries, ids and expiry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, collections.deque] = {}
        # Both kept in the order of their times, oldest first, so that expiring looks only
        # at what has expired (and the next one), not at every thread a process has seen.
        self._touched: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._modes: collections.OrderedDict[str, tuple[float, list[str]]] = (
            collections.OrderedDict()
        )
        self._last = (0, 0)

    def _expire(self, now: float) -> None:
        touched, modes = self._touched, self._modes
        while touched:
            key, at = next(iter(touched.items()))
            if now - at <= TTL_SECONDS:
                break
            touched.popitem(last=False)
            self._entries.pop(key, None)
        while modes and now - next(iter(modes.values()))[0] > TTL_SECONDS:
            modes.popitem(last=False)

    def append(self, thread_id: Any, event: dict[str, Any]) -> str:
        key, now = str(thread_id), time.time()
        with self._lock:
            self._expire(now)
            ms = int(now * 1000)
            self._last = (ms, 0) if ms > self._last[0] else (self._last[0], self._last[1] + 1)
            entry = f"{self._last[0]}-{self._last[1]}"
            log_ = self._entries.setdefault(key, collections.deque(maxlen=MAX_ENTRIES))
            log_.append((entry, json.dumps(event)))
            self._touched[key] = now
            self._touched.move_to_end(key)
            return entry

    def rows(self, thread_id: Any) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._entries.get(str(thread_id), ()))

    def set_modes(self, thread_id: Any, run_id: Any, modes: list[str]) -> None:
        with self._lock:
            self._modes[str(run_id)] = (time.time(), list(modes))
            self._modes.move_to_end(str(run_id))
            self._touched.setdefault(str(thread_id), time.time())

    def modes(self, run_id: Any) -> list[str] | None:
        with self._lock:
            found = self._modes.get(str(run_id))
            return list(found[1]) if found else None

    def forget(self, thread_id: Any, run_ids: list[Any]) -> None:
        with self._lock:
            self._entries.pop(str(thread_id), None)
            self._touched.pop(str(thread_id), None)
            for run_id in run_ids:
                self._modes.pop(str(run_id), None)


_memory = _MemoryLog()


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


# A batch of a thread's events in one round trip: logged, the log's expiry renewed, and
# the members of a channel group counted in the same atomic step (see append_all).
_APPEND = """
local ids = {}
for i = 3, #ARGV do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[i])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
local members = -1
if #KEYS > 1 then members = redis.call('ZCOUNT', KEYS[2], KEYS[3], '+inf') end
local marks = 0
if #KEYS > 3 then marks = redis.call('EXISTS', KEYS[4], KEYS[5]) end
return {members, ids, marks}
"""
_scripts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _append_script(client: Any) -> Any:
    script = _scripts.get(client)
    if script is None:
        script = _scripts[client] = client.register_script(_APPEND)
    return script


def _append_call(
    thread_id: Any, batch: list[dict[str, Any]], group: tuple[str, int] | None, marks: bool = False
) -> tuple[list[str], list[Any]]:
    keys = [_key(thread_id)] + ([group[0], str(group[1])] if group else [])
    if group and marks:
        keys += [_resumable_key(thread_id), _expected_key(thread_id)]
    return keys, [TTL_SECONDS, MAX_ENTRIES, *(json.dumps(event) for event in batch)]


def append_listened(
    thread_id: Any, batch: list[dict[str, Any]], group: tuple[str, int]
) -> tuple[list[str | None], bool, bool]:
    """append_all, and in the same round trip whether the thread's stream is kept for
    someone besides the group's members (a resumable stream, a page about to open): its
    entry ids, whether the group has a member, and whether either holds (as
    stream_listened answers). When unsure: yes to both. Needs Redis."""
    return _append(thread_id, batch, group, marks=True)


def _append(
    thread_id: Any, batch: list[dict[str, Any]], group: tuple[str, int] | None, marks: bool
) -> tuple[list[str | None], bool, bool]:
    keys, args = _append_call(thread_id, batch, group, marks)
    try:
        members, entries, marked = _append_script(redis.client())(keys=keys, args=args)
    except Exception as exc:  # a live stream still works; only resuming would not
        log.warning("could not log a stream event of thread %s: %s", thread_id, exc)
        return [None] * len(batch), True, True
    return [_text(entry) for entry in entries], members != 0, members != 0 or bool(marked)


def append_all(
    thread_id: Any, batch: list[dict[str, Any]], group: tuple[str, int] | None = None
) -> tuple[list[str | None], bool]:
    """Log `batch`: its entry ids (None each when Redis is down), and whether the
    channel group `group` (its members' key, and the time members joined since are
    live) has a member. True when not counted: no group given, no Redis, or Redis
    down.

    The count is taken atomically with the logging, so a member that joins after it
    finds these entries in the log (a stream subscribes before it reads the log): a
    publisher may skip the live send when the count is 0 and nothing is lost.
    """
    if not enabled():
        return [_memory.append(thread_id, event) for event in batch], True
    seqs, heard, _ = _append(thread_id, batch, group, marks=False)
    return seqs, heard


async def aappend_all(
    thread_id: Any, batch: list[dict[str, Any]], group: tuple[str, int] | None = None
) -> tuple[list[str | None], bool]:
    """append_all from an event loop, on that loop's async client (no thread hop)."""
    if not enabled():
        return [_memory.append(thread_id, event) for event in batch], True
    keys, args = _append_call(thread_id, batch, group)
    try:
        members, entries, _ = await _append_script(redis.aclient())(keys=keys, args=args)
    except Exception as exc:  # a live stream still works; only resuming would not
        log.warning("could not log a stream event of thread %s: %s", thread_id, exc)
        return [None] * len(batch), True
    return [_text(entry) for entry in entries], members != 0


def append(thread_id: Any, event: dict[str, Any]) -> str | None:
    """Log one event; its entry id (None when Redis is down)."""
    return append_all(thread_id, [event])[0][0]


def read_from(thread_id: Any, entry_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The logged events from `entry_id` (inclusive) on, oldest first."""
    if not is_entry_id(entry_id):
        return []
    if not enabled():
        first = order(entry_id)
        return [(e, json.loads(x)) for e, x in _memory.rows(thread_id) if order(e) >= first]
    rows = redis.client().xrange(_key(thread_id), min=entry_id, max="+")
    return [(_text(entry), _event(fields)) for entry, fields in rows]


def read_back(thread_id: Any, entry_id: str, count: int) -> list[tuple[str, dict[str, Any]]]:
    """Up to `count` logged events up to `entry_id` (inclusive), newest first."""
    if not is_entry_id(entry_id):
        return []
    if not enabled():
        last = order(entry_id)
        rows = [(e, x) for e, x in reversed(_memory.rows(thread_id)) if order(e) <= last]
        return [(e, json.loads(x)) for e, x in rows[:count]]
    rows = redis.client().xrevrange(_key(thread_id), max=entry_id, min="-", count=count)
    return [(_text(entry), _event(fields)) for entry, fields in rows]


def last_entry(thread_id: Any) -> str | None:
    """The id of the thread's newest logged event; None for an empty log (or Redis down)."""
    if not enabled():
        rows = _memory.rows(thread_id)
        return rows[-1][0] if rows else None
    try:
        rows = redis.client().xrevrange(_key(thread_id), max="+", min="-", count=1)
    except Exception as exc:  # the stream then counts from the log's start
        log.warning("could not read the event log of thread %s: %s", thread_id, exc)
        return None
    return _text(rows[0][0]) if rows else None


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
        _memory.set_modes(thread_id, run_id, modes)  # the log is always kept in memory
        return
    client = redis.client()
    client.set(_resumable_key(thread_id), "1", ex=TTL_SECONDS)
    client.set(_modes_key(run_id), json.dumps(modes), ex=TTL_SECONDS)


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


def _modes_key(run_id: Any) -> str:
    return f"hitl:streammodes:{run_id}"


def forget(thread_id: Any, run_ids: list[Any]) -> None:
    """Drop every key this module keeps for a thread and its runs: a thread created
    again under the same id (clients choose ids) must not replay the old one's events."""
    if not enabled():
        _memory.forget(thread_id, run_ids)
        return
    keys = [_key(thread_id), _resumable_key(thread_id), _expected_key(thread_id)]
    keys += [_modes_key(run_id) for run_id in run_ids]
    try:
        redis.client().delete(*keys)
    except Exception as exc:  # the log still expires within TTL_SECONDS
        log.warning("could not drop the event log of deleted thread %s: %s", thread_id, exc)


def saved_modes(run_id: Any) -> list[str] | None:
    if not enabled():
        return _memory.modes(run_id)
    raw = redis.client().get(_modes_key(run_id))
    return json.loads(raw) if raw else None
