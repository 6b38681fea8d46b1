"""AG-UI events for thread streams: the wire vocabulary of DESIGN.md.

The worker translates each LangGraph stream chunk with `events_for_chunk` and
publishes the result to the thread's channel group; the thread WebSocket, the
AG-UI endpoint (hitl/api/agui.py) and the LangGraph-compatible stream
(hitl/api/langgraph) all read that one stream. Every event is built with the
ag-ui-protocol models, so a dict that leaves this module parses as an AG-UI event.

Besides the AG-UI events proper, each `updates`/`messages` chunk also travels
verbatim as a RAW event (source "langgraph") so the LangGraph-compatible API can
replay stream modes that AG-UI has no word for.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

from ag_ui.core import (
    CustomEvent,
    Interrupt,
    RawEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import BaseEvent

from hitl.core.models import HumanInterrupt

# The LangGraph stream modes the worker asks for (hitl/core/worker).
# "tasks" says when a node starts (updates only say when it ended): the page names it.
STREAM_MODES = ["values", "updates", "messages", "tasks", "custom"]
# While nobody listens to the thread stream: what tells the run's pause and end.
UNWATCHED_MODES = ["updates", "values"]
NODE_STARTED = "hitl.node_started"
RAW_SOURCE = "langgraph"
# The /langgraph `events` mode: LangGraph's astream_events v2 tree, run by the worker.
EVENTS = "events"
# What the thread stream carries at the root graph already (RAW or STATE_SNAPSHOT).
THREAD_STREAM_CARRIES = frozenset(("values", "updates", "messages", "custom"))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dump(event: BaseEvent) -> dict[str, Any]:
    if event.timestamp is None:
        event.timestamp = _now_ms()
    return event.model_dump(mode="json", by_alias=True)


# --- JSON for LangGraph values ------------------------------------------------------


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    # langgraph.types.Interrupt (a dataclass): the fields LangGraph Server sends, its
    # response_schema too when it is JSON already (null, usually).
    if hasattr(value, "value") and hasattr(value, "id") and type(value).__name__ == "Interrupt":
        out = {"value": value.value, "id": value.id}
        schema = getattr(value, "response_schema", ...)
        if schema is None or isinstance(schema, dict):
            out["response_schema"] = schema
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # As LangGraph Server's orjson writes one (a Command input, say): its fields.
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def jsonable(value: Any) -> Any:
    """Make a LangGraph value (messages, interrupts, tuples) plain JSON."""
    return json.loads(json.dumps(value, default=_json_default))


# --- run lifecycle ------------------------------------------------------------------


def run_started(thread_id: Any, run_id: Any) -> dict[str, Any]:
    return _dump(RunStartedEvent(thread_id=str(thread_id), run_id=str(run_id)))


def run_finished(
    thread_id: Any,
    run_id: Any,
    *,
    interrupts: list[tuple[str, Any, Any]],
    result: Any,
    rows: list[HumanInterrupt] | None = None,
) -> dict[str, Any]:
    """RUN_FINISHED; a paused run carries an interrupt outcome with one entry per request.

    Entry ids are HumanInterrupt ids (what an AG-UI `resume` entry answers): `rows`, the
    run's rows in order as run_finish made them, or else read from the database; without
    rows (a run the app did not record) they fall back to the LangGraph interrupt ids.
    """
    if not interrupts:
        return _dump(
            RunFinishedEvent(
                thread_id=str(thread_id),
                run_id=str(run_id),
                result=result,
                outcome=RunFinishedSuccessOutcome(),
            )
        )
    if rows is None:
        rows = list(
            HumanInterrupt.objects.filter(run_id=run_id).select_related("reviewer_group").in_order()
        )
    items = [interrupt_item(row) for row in rows] or [
        Interrupt(
            id=str(interrupt_id),
            reason="input_required",
            message=value if isinstance(value, str) else None,
            response_schema=schema if isinstance(schema, dict) else None,
        )
        for interrupt_id, value, schema in interrupts
    ]
    return _dump(
        RunFinishedEvent(
            thread_id=str(thread_id),
            run_id=str(run_id),
            outcome=RunFinishedInterruptOutcome(interrupts=items),
        )
    )


def run_error(message: str, *, code: str | None = None) -> dict[str, Any]:
    return _dump(RunErrorEvent(message=message[:2000] or "The run failed.", code=code))


# --- interrupts as AG-UI Interrupt entries ----------------------------------------------


def _human_response_schema(allowed: list[str], action: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A HumanResponse: {type, args}.",
        "properties": {
            "type": {"enum": allowed},
            "args": {
                "description": "response: text; edit: {action, args}; accept/ignore: null.",
                "anyOf": [
                    {"type": "null"},
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {"action": {"const": action}, "args": {"type": "object"}},
                        "required": ["args"],
                    },
                ],
            },
        },
        "required": ["type"],
    }


def interrupt_reason(row) -> str:
    raw = row.raw_value if isinstance(row.raw_value, dict) else {}
    if raw.get("client_tool"):
        return "tool_call"
    if raw.get("clarification"):
        return "clarification"
    if row.kind in ("hitl_request", "tool_approval"):
        return "tool_approval"
    if row.kind in ("human_interrupt", "human_interrupt_list"):
        return "human_review"
    return "input_required"


def interrupt_tool_call_id(row) -> str | None:
    raw = row.raw_value
    if isinstance(raw, list) and row.position < len(raw):
        raw = raw[row.position]
    if isinstance(raw, dict):
        if row.kind == "hitl_request":
            requests = raw.get("action_requests") or []
            if row.position < len(requests) and isinstance(requests[row.position], dict):
                found = requests[row.position].get("id") or requests[row.position].get(
                    "tool_call_id"
                )
                return str(found) if found else None
        found = raw.get("tool_call_id")
        return str(found) if found else None
    return None


def interrupt_response_schema(row) -> dict[str, Any]:
    """The JSON Schema of the `payload` an AG-UI resume entry sends for this row."""
    allowed = row.allowed_types
    raw = row.raw_value if isinstance(row.raw_value, dict) else {}
    if raw.get("client_tool"):
        return {"description": "The tool's result (any JSON; text is passed on as is)."}
    if row.kind == "raw":
        if isinstance(row.response_schema, dict) and row.response_schema:
            return row.response_schema
        return {"type": ["string", "null"], "description": "The answer; null skips it."}
    if row.kind in ("hitl_request", "tool_approval"):
        decisions = [
            name
            for name, needs in (
                ("approve", "accept"),
                ("edit", "edit"),
                ("reject", "ignore"),
                ("respond", "response"),
            )
            if needs in allowed
        ]
        return {
            "type": "object",
            "description": "A decision: approve, edit (edited_action), reject or respond (message).",
            "properties": {
                "type": {"enum": decisions},
                "message": {"type": "string"},
                "edited_action": {
                    "type": "object",
                    "properties": {"name": {"const": row.action}, "args": {"type": "object"}},
                    "required": ["args"],
                },
            },
            "required": ["type"],
        }
    return _human_response_schema(allowed, row.action)


def interrupt_item(row) -> Interrupt:
    """One pending HumanInterrupt row as an AG-UI Interrupt."""
    message = row.description or (f"Review `{row.action}`" if row.action else None)
    if not message and isinstance(row.raw_value, str):
        message = row.raw_value
    return Interrupt(
        id=str(row.pk),
        reason=interrupt_reason(row),
        message=message or None,
        tool_call_id=interrupt_tool_call_id(row),
        response_schema=interrupt_response_schema(row),
        expires_at=row.expires_at.isoformat() if row.expires_at else None,
        metadata={
            "interruptId": row.interrupt_id,
            "position": row.position,
            "kind": row.kind,
            "action": row.action,
            "args": row.args,
            "allowed": row.allowed_types,
            "reviewerGroup": row.reviewer_group.name if row.reviewer_group_id else None,
            "value": row.raw_value,
        },
    )


# --- stream chunks ------------------------------------------------------------------


class _MessageTracker:
    """Which streamed messages and tool calls are open, across chunks of one process.

    LangGraph streams a message as chunks and later writes the complete message in
    the node's update; START/END pairs need to remember what was opened. Keyed by
    message id (unique across runs), bounded so an abandoned stream cannot leak.
    """

    LIMIT = 2000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # message id -> {"text": bool, "calls": {index: tool_call_id}, "open": set}
        self._open: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()

    def _remember_done(self, message_id: str) -> None:
        self._done[message_id] = None
        while len(self._done) > self.LIMIT:
            self._done.popitem(last=False)

    def chunk(self, message: Any) -> list[BaseEvent]:
        message_id = message.id or f"msg-{uuid.uuid4()}"
        out: list[BaseEvent] = []
        with self._lock:
            if message_id in self._done:
                return []
            state = self._open.get(message_id)
            if state is None:
                state = self._open[message_id] = {"text": False, "calls": {}, "open": set()}
                while len(self._open) > self.LIMIT:
                    self._open.popitem(last=False)
            text = _text_of(message.content)
            if text:
                if not state["text"]:
                    state["text"] = True
                    out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
                out.append(TextMessageContentEvent(message_id=message_id, delta=text))
            for part in getattr(message, "tool_call_chunks", None) or []:
                index = part.get("index")
                index = index if index is not None else len(state["calls"])
                call_id = state["calls"].get(index)
                if call_id is None and (part.get("id") or part.get("name")):
                    call_id = part.get("id") or f"call-{uuid.uuid4()}"
                    state["calls"][index] = call_id
                    state["open"].add(call_id)
                    out.append(
                        ToolCallStartEvent(
                            tool_call_id=call_id,
                            tool_call_name=part.get("name") or "tool",
                            parent_message_id=message_id,
                        )
                    )
                if call_id is not None and part.get("args"):
                    out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=part["args"]))
            if getattr(message, "chunk_position", None) == "last":
                out.extend(self._close(message_id))
        return out

    def _close(self, message_id: str) -> list[BaseEvent]:
        state = self._open.pop(message_id, None)
        self._remember_done(message_id)
        if state is None:
            return []
        out: list[BaseEvent] = []
        if state["text"]:
            out.append(TextMessageEndEvent(message_id=message_id))
        for call_id in state["calls"].values():
            if call_id in state["open"]:
                out.append(ToolCallEndEvent(tool_call_id=call_id))
        return out

    def complete(self, message: Any) -> list[BaseEvent]:
        """A whole message: close it if it was streamed, else emit it in one go."""
        message_id = message.id or f"msg-{uuid.uuid4()}"
        with self._lock:
            if message_id in self._open:
                return self._close(message_id)
            if message_id in self._done:
                return []
            self._remember_done(message_id)
        kind = getattr(message, "type", "")
        out: list[BaseEvent] = []
        if kind in ("ai", "AIMessageChunk"):
            text = _text_of(message.content)
            if text:
                out += [
                    TextMessageStartEvent(message_id=message_id, role="assistant"),
                    TextMessageContentEvent(message_id=message_id, delta=text),
                    TextMessageEndEvent(message_id=message_id),
                ]
            for call in getattr(message, "tool_calls", None) or []:
                call_id = call.get("id") or f"call-{uuid.uuid4()}"
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call_id,
                        tool_call_name=call.get("name") or "tool",
                        parent_message_id=message_id,
                    )
                )
                out.append(
                    ToolCallArgsEvent(
                        tool_call_id=call_id, delta=json.dumps(call.get("args") or {})
                    )
                )
                out.append(ToolCallEndEvent(tool_call_id=call_id))
        elif kind == "tool":
            out.append(
                ToolCallResultEvent(
                    message_id=message_id,
                    tool_call_id=str(getattr(message, "tool_call_id", "") or ""),
                    content=_text_of(message.content) or "",
                    role="tool",
                )
            )
        return out

    def close_written(self, update: Any) -> list[BaseEvent]:
        """Close streamed messages that a node's update wrote to the state."""
        out: list[BaseEvent] = []
        for message in _messages_in(update):
            if message.id:
                with self._lock:
                    if message.id not in self._open:
                        continue
                    out.extend(self._close(message.id))
        return out


_tracker = _MessageTracker()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text") or "")
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
        )
    return ""


def _is_message(value: Any) -> bool:
    return hasattr(value, "content") and hasattr(value, "type") and hasattr(value, "id")


def _messages_in(update: Any) -> list[Any]:
    found: list[Any] = []
    values = update.values() if isinstance(update, dict) else [update]
    for value in values:
        if _is_message(value):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if _is_message(v))
    return found


def _raw(mode: str, chunk: Any, ns: tuple[str, ...] = ()) -> dict[str, Any]:
    event: dict[str, Any] = {"mode": mode, "data": jsonable(chunk)}
    if ns:
        event["ns"] = list(ns)
    return _dump(RawEvent(source=RAW_SOURCE, event=event))


def client_modes(requested: list[str]) -> frozenset[str]:
    """The LangGraph modes behind a /langgraph client's stream modes (Run.stream_modes):
    "messages-tuple" is LangGraph's "messages"; "events" asks the worker to run
    `astream_events` (v2) and is no stream mode of `astream` (see `astream_modes`)."""
    return frozenset("messages" if m == "messages-tuple" else m for m in requested)


def astream_modes(client: frozenset[str], *, thread_stream: bool = True) -> list[str]:
    """The stream modes the worker asks LangGraph for: the thread stream's while someone
    listens to it (else only UNWATCHED_MODES, which tell the run's pause), a client's own
    added."""
    base = STREAM_MODES if thread_stream else UNWATCHED_MODES
    return base + sorted(client - set(base) - {EVENTS})


def client_chunk_events(
    ns: tuple[str, ...],
    mode: str,
    chunk: Any,
    client_modes: frozenset[str],
    *,
    thread_stream: bool = True,
) -> list[dict[str, Any]]:
    """The events only a /langgraph client asked for: a subgraph's chunks (any mode) and
    the modes the thread stream does not carry (debug, tasks, checkpoints). While nobody
    listens to the thread stream (`thread_stream` false, and `events_for_chunk` not
    called), the root's chunks of the client's modes too, as that stream carries them, and
    nothing for AG-UI alone: a /langgraph stream reads no more of the run than its modes."""
    if mode not in client_modes:
        return []
    if not ns and mode in THREAD_STREAM_CARRIES:
        if thread_stream:
            return []  # events_for_chunk carries it
        if mode == "values":
            return events_for_chunk(mode, chunk)
        return [_raw(mode, chunk)]
    return [_raw(mode, chunk, ns)]


def events_for_chunk(mode: str, chunk: Any) -> list[dict[str, Any]]:
    """Translate one LangGraph stream chunk into AG-UI event dicts."""
    events: list[BaseEvent] = []
    if mode == "values":
        # LangGraph also emits {"__interrupt__": ...} in this mode: not state, and the
        # interrupts reach AG-UI clients through RUN_FINISHED. The chunk itself goes on
        # as RAW, where it falls in LangGraph's order, for /langgraph values streams.
        if not isinstance(chunk, dict):
            return []
        out = [_raw(mode, chunk)] if "__interrupt__" in chunk else []
        if not (chunk and all(k.startswith("__") for k in chunk)):
            state = {k: v for k, v in chunk.items() if not k.startswith("__")}
            out.insert(0, _dump(StateSnapshotEvent(snapshot=jsonable(state))))
        return out
    if mode == "messages" and isinstance(chunk, (list, tuple)) and len(chunk) == 2:
        message, _metadata = chunk
        if _is_message(message):
            if type(message).__name__.endswith("Chunk"):
                events = _tracker.chunk(message)
            else:
                events = _tracker.complete(message)
        return [_raw(mode, chunk)] + [_dump(e) for e in events]
    if mode == "tasks" and isinstance(chunk, dict):
        # A task's start has no result yet; its end is reported by "updates" as before.
        if "result" in chunk or "error" in chunk or not isinstance(chunk.get("name"), str):
            return []
        if chunk["name"].startswith("__"):
            return []
        return [_dump(CustomEvent(name=NODE_STARTED, value={"node": chunk["name"]}))]
    if mode == "updates" and isinstance(chunk, dict):
        for node, update in chunk.items():
            if node.startswith("__"):
                continue
            events.extend(_tracker.close_written(update))
            events.append(StepStartedEvent(step_name=node))
            events.append(StepFinishedEvent(step_name=node))
        return [_raw(mode, chunk)] + [_dump(e) for e in events]
    if mode == "custom":  # what a node wrote with get_stream_writer(), passed on verbatim
        return [_raw(mode, chunk)]
    return []
