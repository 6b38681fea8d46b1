"""Server-sent events for runs, in the LangGraph Server's stream modes.

The run executes on a worker; what it streams reaches this process through the
thread's channel group (see hitl.core.live.agui): STATE_SNAPSHOT events become `values`,
RAW "langgraph" events carry the `updates`, `messages` and `custom` chunks verbatim.
`debug`, `tasks`, `checkpoints` and subgraph chunks (named `mode|<namespace>`, as
LangGraph Server names them) are streamed by the worker only for runs started with
those modes (Run.stream_modes); a run started with modes streams them from its start,
whoever listens, so a later join gets them too. So is the `events` mode: for a run
started with it the worker runs the graph with `astream_events` (v2) and its events come
as RAW "events" chunks, as LangGraph Server sends them. A client that asks for `events`
of a run started without it (a thread stream) gets an approximation built from the
other modes (chat model stream + node ends).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from langchain_core.messages import (
    AIMessageChunk,
    HumanMessageChunk,
    SystemMessageChunk,
    ToolMessageChunk,
    message_chunk_to_message,
)

from hitl.api.langgraph import serializers, state
from hitl.core.live import eventlog
from hitl.core.live.agui import RAW_SOURCE
from hitl.core.live.run_events import run_events_of
from hitl.core.live.waiting import (
    TERMINAL,
    ThreadSubscription,
    fetch_run,
    released,
)
from hitl.core.models import Run

log = logging.getLogger(__name__)

STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "events",
    "custom",
    "debug",
    "tasks",
    "checkpoints",
)
KEEPALIVE_SECONDS = 15.0
# Cancels started for clients that left mid-run (a reference keeps each task alive).
_disconnects: set[asyncio.Task] = set()


def in_background(make: Callable[[], Awaitable[Any]]) -> None:
    """Run a coroutine as a task of its own, kept until done: the request's task that
    asks for it is being cancelled (its client left)."""
    task = asyncio.ensure_future(make())
    _disconnects.add(task)
    task.add_done_callback(_disconnects.discard)


def _stop_if_client_left() -> None:
    """Raise CancelledError if the request's task was told to stop (Django cancels it
    when the client disconnects). Asked, not only caught: an await running at that
    moment may have swallowed the CancelledError (asgiref's sync_to_async waits for its
    thread and returns the result), leaving only the task's count of cancel requests."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


# The id of the closing values part: a client back with it has had the whole run.
FINAL_ID = "final"
# Last-Event-ID "-1": from the run's start (the JS SDK's rejoin); the log's first entry.
FROM_START = "-1"
FIRST_ENTRY = "0-0"
# The metadata part's id is "<the log's last entry before the stream began>#*": a client
# back with it has had no part yet (langgraph_sdk reconnects without Last-Event-ID when
# no part had an id, and would get metadata again and only what is live from then on).
WHOLE_ENTRY = "*"
_EVERY_PART = sys.maxsize


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    lines = f"event: {event}\n"
    if event_id:
        lines += f"id: {event_id}\n"
    return (lines + f"data: {json.dumps(data, default=str)}\n\n").encode()


def normalize_modes(stream_mode: Any) -> list[str]:
    if stream_mode is None:
        return ["values"]
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    return [m for m in modes if m in STREAM_MODES] or ["values"]


_CHUNK_CLASSES = {
    cls.__name__: cls
    for cls in (AIMessageChunk, ToolMessageChunk, HumanMessageChunk, SystemMessageChunk)
}


def run_stream_modes(stream_mode: Any) -> list[str]:
    """The modes a new run keeps: the worker streams every one of them from the run's
    start, whoever listens (a join or reconnect at any moment gets them all)."""
    return normalize_modes(stream_mode)


def _checkpoint_of(config: Any) -> dict[str, Any] | None:
    """A RunnableConfig as LangGraph Server's Checkpoint object."""
    c = (config.get("configurable") if isinstance(config, dict) else None) or {}
    if not c.get("thread_id") or not c.get("checkpoint_id"):
        return None
    out = {"checkpoint_id": c["checkpoint_id"], "thread_id": c["thread_id"]}
    if "checkpoint_ns" in c:
        out["checkpoint_ns"] = c["checkpoint_ns"] or ""
    if "checkpoint_map" in c:
        out["checkpoint_map"] = c["checkpoint_map"]
    return out


def _debug(chunk: Any) -> Any:
    """A `debug` chunk as LangGraph Server sends it: a checkpoint's payload also names its
    `checkpoint` and `parent_checkpoint`, and a subgraph task its `checkpoint`."""
    payload = chunk.get("payload") if isinstance(chunk, dict) else None
    if chunk.get("type") != "checkpoint" or not isinstance(payload, dict):
        return chunk
    tasks = []
    for task in payload.get("tasks") or []:
        state_ = task.get("state") if isinstance(task, dict) else None
        if isinstance(state_, dict) and state_.get("configurable"):
            task = {k: v for k, v in task.items() if k != "state"}
            task["checkpoint"] = state_["configurable"]
        tasks.append(task)
    payload = {
        **payload,
        "checkpoint": _checkpoint_of(payload.get("config")),
        "parent_checkpoint": _checkpoint_of(payload.get("parent_config")),
        "tasks": tasks,
    }
    return {**chunk, "payload": payload}


class _Translator:
    """Turns the thread's AG-UI/RAW events into LangGraph SSE parts for some modes."""

    def __init__(self, run_id: str, modes: list[str], native_events: bool = False):
        self.run_id = run_id
        self.modes = set(modes)
        # The worker streams astream_events' own events (the run was started with the
        # `events` mode): they go on verbatim, with no approximation next to them.
        self.native_events = native_events
        self.approximate = "events" in self.modes and not native_events
        self.last_values: Any = None
        # Message id -> the chunks so far (None: a whole message).
        self.partial: dict[str, Any] = {}

    def values(self, snapshot: Any) -> list[bytes]:
        if "values" not in self.modes or snapshot == self.last_values:
            return []
        self.last_values = snapshot
        return [sse("values", snapshot)]

    def raw(self, mode: str, data: Any, ns: list[str] | None = None) -> list[bytes]:
        # A subgraph's chunk is named "mode|<its namespace>", as LangGraph Server does.
        name = "|".join([mode, *ns]) if ns else mode
        out: list[bytes] = []
        if mode == "updates":
            if "updates" in self.modes:
                out.append(sse(name, data))
            if self.approximate and isinstance(data, dict) and not ns:
                for node, update in data.items():
                    out.append(self._event("on_chain_end", node, {"output": update}))
        elif mode == "values" and not ns:  # the root's values with the pause's interrupts
            out.extend(self.values(data))
        elif mode in ("custom", "values", "tasks", "checkpoints"):
            if mode in self.modes:
                out.append(sse(name, data))
        elif mode == "events":
            if "events" in self.modes and not ns:
                out.append(sse("events", data))
        elif mode == "debug":
            if "debug" in self.modes:
                out.append(sse(name, _debug(data)))
        elif mode == "messages" and isinstance(data, list) and len(data) == 2:
            message, metadata = data
            if "messages-tuple" in self.modes:
                out.append(sse(name, data))
            if "messages" in self.modes and isinstance(message, dict):
                out.extend(self._messages(message, metadata))
            if self.approximate and not ns:
                name = (metadata or {}).get("langgraph_node") or "model"
                out.append(self._event("on_chat_model_stream", name, {"chunk": message}, metadata))
        return out

    def _messages(self, message: dict[str, Any], metadata: Any) -> list[bytes]:
        """The `messages` mode, as LangGraph Server builds it: metadata once per message,
        then each chunk as `messages/partial` with the message so far (a whole message,
        e.g. a tool's, as `messages/complete`)."""
        message_id = str(message.get("id") or "")
        out = []
        if message_id not in self.partial:
            out.append(sse("messages/metadata", {message_id: {"metadata": metadata}}))
        chunk_class = _CHUNK_CLASSES.get(str(message.get("type")))
        if chunk_class is None:
            self.partial[message_id] = None
            return [*out, sse("messages/complete", [message])]
        chunk = chunk_class(**{k: v for k, v in message.items() if k != "type"})
        previous = self.partial.get(message_id)
        merged = chunk if previous is None else previous + chunk
        self.partial[message_id] = merged
        whole = message_chunk_to_message(merged).model_dump(mode="json")
        return [*out, sse("messages/partial", [whole])]

    def _event(self, event: str, name: str, data: Any, metadata: Any = None) -> bytes:
        return sse(
            "events",
            {
                "event": event,
                "name": name,
                "run_id": self.run_id,
                "data": data,
                "metadata": metadata or {},
                "tags": list((metadata or {}).get("tags") or []),
            },
        )


def _parts(translate: _Translator, event: dict[str, Any]) -> list[bytes]:
    kind = event.get("type")
    if kind == "STATE_SNAPSHOT":
        return translate.values(event.get("snapshot"))
    if kind == "RAW" and event.get("source") == RAW_SOURCE:
        raw = event.get("event") or {}
        return translate.raw(raw.get("mode"), raw.get("data"), raw.get("ns"))
    return []


# How far back a reconnect looks for the values chunk of its run's pause.
PAUSE_LOOKBACK = 200


def _paused_values(thread_id: Any, run_id: str, entry_id: str) -> Any:
    """The run's root values chunk at its pause, if the log has it up to `entry_id`:
    a client back after it has had it (the parts after a pause are tasks and debug)."""
    for _, event in eventlog.read_back(thread_id, entry_id, PAUSE_LOOKBACK):
        if event.get("type") == "RUN_STARTED" and event.get("runId") == run_id:
            return None
        raw = event.get("event") if event.get("type") == "RAW" else None
        if isinstance(raw, dict) and raw.get("mode") == "values" and not raw.get("ns"):
            data = raw.get("data")
            if isinstance(data, dict) and "__interrupt__" in data:
                return data
    return None


def _with_id(part: bytes, event_id: str) -> bytes:
    """Give an SSE part an `id:` line (after its event line)."""
    head, _, rest = part.partition(b"\n")
    return head + b"\nid: " + event_id.encode() + b"\n" + rest


def _parse_last_id(last_event_id: str | None) -> tuple[str, int] | None:
    """'<log entry id>#<part>' -> (entry id, part index); '<entry id>#*' (a metadata
    part's) -> (entry id, past its last part); anything else -> None."""
    if not last_event_id:
        return None
    seq, _, index = last_event_id.partition("#")
    if not eventlog.is_entry_id(seq):
        return None
    if index == WHOLE_ENTRY:
        return seq, _EVERY_PART
    if index.isdigit():
        return seq, int(index)
    return None


def _starts_in(logged: list[tuple[str, dict[str, Any]]], run: Run) -> bool:
    """Whether run `run`'s entries in `logged` begin at its RUN_STARTED: it is there, or
    the run had not started when the stream was opened (entries before it are another
    run's). Else the run had started before the first of them: they are its."""
    run_id = str(run.pk)
    started_here = any(
        event.get("type") == "RUN_STARTED" and event.get("runId") == run_id for _, event in logged
    )
    return started_here or run.status == Run.Status.QUEUED


def _of_run(
    logged: list[tuple[str, dict[str, Any]]], run_id: str, *, from_start: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The entries of `logged` that are run `run_id`'s, up to its end. From its start
    when `from_start` (the thread's log also holds its earlier runs), else from the first."""
    started = not from_start
    for entry, event in logged:
        kind = event.get("type")
        if not started:
            started = kind == "RUN_STARTED" and event.get("runId") == run_id
            if not started:
                continue
        if kind in ("RUN_FINISHED", "RUN_ERROR") and (
            kind == "RUN_ERROR" or event.get("runId") == run_id
        ):
            return
        yield entry, event


async def run_events(
    *,
    sub: ThreadSubscription,
    run: Run,
    stream_mode: Any,
    timeout: float,
    last_event_id: str | None = None,
    on_disconnect: Callable[[], Awaitable[Any]] | None = None,
    whole_run: bool = False,
    began_after: str | None = None,
) -> AsyncIterator[bytes]:
    """Stream one run until it ends (or `timeout`), then close `sub`.

    `whole_run`: the stream created its run (it subscribed before), so it owes the
    client every part of it; a join owes what follows it.

    `on_disconnect` (a client's `on_disconnect="cancel"`, `cancel_on_disconnect`) is
    called when the client goes away before the run ended.

    Every part from a logged event has the id `<log entry id>#<n>`; a client that comes
    back with `last_event_id` (a web restart, a dropped connection) gets what followed
    it, from the thread's event log, then the live rest: nothing missed, nothing twice.
    `began_after` is the log's last entry before the stream subscribed (None: the log's
    start): the metadata part's id names it, so a client that had only metadata comes
    back to every part after it (for a stream of the whole run, from the run's start).
    """
    run_id = str(run.pk)
    over = False
    modes = normalize_modes(stream_mode)
    translate = _Translator(run_id, modes, "events" in (run.stream_modes or ()))
    sent: set[str] = set()  # the log entries whose parts went out
    # "-1" (useStream's rejoin after a reload): everything, from the run's start.
    from_start = last_event_id == FROM_START
    resume_from = (FIRST_ENTRY, -1) if from_start else _parse_last_id(last_event_id)
    # Back with a metadata part's id: the client has had nothing of the log.
    only_metadata = resume_from is not None and resume_from[1] == _EVERY_PART
    # Whether a read of the log from resume_from (or the log's start) starts at the run's
    # RUN_STARTED, earlier entries being another run's.
    log_from_start = resume_from is None or from_start
    try:
        await sync_to_async(eventlog.mark_resumable)(run.thread_id, run_id, modes)
        _stop_if_client_left()  # the client may have left while the view ran
        if last_event_id == FINAL_ID:
            return  # the client has had everything, the final values included
        seen: tuple[int, int] | None = None
        if resume_from is None or from_start:
            mark = FIRST_ENTRY if from_start else began_after or FIRST_ENTRY
            yield sse(
                "metadata",
                {"run_id": run_id, "attempt": max(run.attempts, 1)},
                f"{mark}#{WHOLE_ENTRY}",
            )
            if translate.approximate:
                current = await fetch_run(run_id)
                graph = current.thread.graph if current else ""
                yield translate._event("on_chain_start", graph, {})
        if resume_from is not None:
            # Replay what the log holds after the client's last part, up to the run's end.
            seq, index = resume_from
            if not from_start and not only_metadata:
                translate.last_values = await sync_to_async(_paused_values)(
                    run.thread_id, run_id, seq
                )
            logged = await sync_to_async(eventlog.read_from)(run.thread_id, seq)
            if only_metadata:
                log_from_start = _starts_in(logged, run)
            for entry, event in _of_run(logged, run_id, from_start=log_from_start):
                seen = eventlog.order(entry)
                sent.add(entry)
                for n, part in enumerate(_parts(translate, event)):
                    if entry != seq or n > index:
                        yield _with_id(part, f"{entry}#{n}")
        last_sent = time.monotonic()
        async for event in run_events_of(sub, run_id, timeout):
            _stop_if_client_left()
            if event is None:
                if time.monotonic() - last_sent > KEEPALIVE_SECONDS:
                    last_sent = time.monotonic()
                    yield b": keepalive\n\n"
                continue
            seq = sub.last_seq
            if seq and seen is not None and eventlog.order(seq) <= seen:
                continue  # already replayed from the log
            if seq:
                sent.add(seq)
            for n, part in enumerate(_parts(translate, event)):
                last_sent = time.monotonic()
                yield _with_id(part, f"{seq}#{n}") if seq else part
        if not sub.heard_end and (whole_run or resume_from is not None):
            # The run's end was read in the database, not heard: live messages may have
            # been lost on the way (the channel layer away or behind). The log has them.
            # From the client's last part, or the run's start.
            first = resume_from[0] if resume_from else FIRST_ENTRY
            logged = await sync_to_async(eventlog.read_from)(run.thread_id, first)
            for entry, event in _of_run(logged, run_id, from_start=log_from_start):
                if entry in sent:
                    continue
                for n, part in enumerate(_parts(translate, event)):
                    yield _with_id(part, f"{entry}#{n}")
        _stop_if_client_left()
        over = True  # whatever follows, the client did not leave before the run's end
        final = await fetch_run(run_id)
        if final is None:
            return
        if final.status == Run.Status.ERROR:
            yield sse("error", serializers.error_json(final.error))
            return
        if final.status not in TERMINAL:
            yield sse(
                "error",
                {"error": "TimeoutError", "message": f"Still {final.status} after {timeout:.0f}s."},
            )
            return
        # The worker's values chunk at a pause went by already, in LangGraph's order.
        seen_pause = isinstance(translate.last_values, dict) and (
            "__interrupt__" in translate.last_values
        )
        if "values" in modes and not seen_pause:
            # As LangGraph Server does: a run that pauses ends its values stream with the
            # state plus "__interrupt__" (what useStream reads to show the interrupt live).
            if final.status == Run.Status.INTERRUPTED:
                output = await released(serializers.run_output)(final)
                translate.last_values = output
                yield sse("values", output, FINAL_ID)
            else:
                values, _ = await released(state.thread_values)(final.thread)
                for part in translate.values(values):
                    yield _with_id(part, FINAL_ID)
        if translate.approximate:
            yield translate._event(
                "on_chain_end", final.thread.graph, {"output": translate.last_values}
            )
    except Exception as exc:  # the stream has started: report it in-band, never hang
        log.exception("stream of run %s failed", run_id)
        yield sse("error", {"error": type(exc).__name__, "message": str(exc)[:1000]})
    finally:
        if on_disconnect is not None and not over:
            # The client left mid-run: the request's task is being cancelled.
            in_background(on_disconnect)
        await sub.close()
