"""AG-UI endpoint: POST a RunAgentInput to /agui/<graph>, read back an SSE stream of AG-UI events.

One POST is one AG-UI run. A new input starts a run of the graph on our Thread
(the client's threadId maps to it) with the messages, the client's tools
(`tools` state key, as AG-UI LangGraph agents read them), the client state and
context. A paused run ends with RUN_FINISHED carrying an interrupt outcome, one
entry per pending HumanInterrupt row; the next POST answers them with `resume`
entries (or, for a client tool, with its tool message), through
decisions.interrupt_resolve like any reviewer's answer.

Same auth as the other APIs (API token or session). Errors found before the run
starts are JSON 4xx responses; failures after it started are RUN_ERROR events.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from ag_ui.core import (
    Event,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
)
from ag_ui.encoder import EventEncoder
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.http import StreamingHttpResponse
from ninja import NinjaAPI
from pydantic import TypeAdapter, ValidationError

from hitl.api.errors import ERRORS, BoundedParser, Error, install_error_handlers
from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph import state as lg_state
from hitl.api.langgraph.api import AUTH
from hitl.api.sse import sse_response
from hitl.core import errors
from hitl.core.access.permissions import user_can_view_thread
from hitl.core.decisions import resume as decision_resume
from hitl.core.errors import error_line
from hitl.core.live import agui
from hitl.core.live.run_events import run_events_of
from hitl.core.live.waiting import ThreadSubscription, fetch_run, released
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import thread_graph_check

log = logging.getLogger(__name__)

api = NinjaAPI(
    title="HITL AG-UI endpoint",
    version="1",
    description=__doc__,
    urls_namespace="agui",
    auth=AUTH,
    parser=BoundedParser(),
)

THREAD_NAMESPACE = uuid.UUID("0b6a3c1e-9a53-4c8e-8f1b-2f5e8d9c7a40")
# Events the worker publishes that an AG-UI run stream forwards as they are.
FORWARDED = {
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STEP_STARTED",
    "STEP_FINISHED",
    "CUSTOM",
}
EVENT = TypeAdapter(Event)


install_error_handlers(api, auth_hint="send an API token (x-api-key: …).")


# --- input ------------------------------------------------------------------------


def thread_uuid(user, thread_id: str) -> uuid.UUID:
    """Our Thread id for an AG-UI threadId: itself when it is a UUID, else derived per user."""
    try:
        return uuid.UUID(thread_id)
    except ValueError:
        return uuid.uuid5(THREAD_NAMESPACE, f"{user.pk}:{thread_id}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            getattr(part, "text", None) or (part.get("text", "") if isinstance(part, dict) else "")
            for part in content
        )
    return ""


def _langchain_message(message: Any) -> dict[str, Any] | None:
    """An AG-UI message as a LangChain message dict (add_messages accepts them)."""
    role = getattr(message, "role", None)
    base = {"id": message.id}
    if role == "user":
        return {**base, "role": "user", "content": _text(message.content)}
    if role in ("system", "developer"):
        return {**base, "role": "system", "content": _text(message.content)}
    if role == "assistant":
        out = {**base, "role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in message.tool_calls
            ]
        return out
    if role == "tool":
        return {
            **base,
            "role": "tool",
            "content": _text(message.content),
            "tool_call_id": message.tool_call_id,
        }
    return None  # activity and reasoning messages are not conversation input


def _new_messages(thread: Thread | None, body: RunAgentInput) -> list[dict[str, Any]]:
    """The client's messages minus what the thread already has.

    AG-UI clients resend the whole conversation; messages the graph already holds
    (same id) and tool results it already recorded (same tool_call_id, e.g. the one
    that resumed a client tool) would otherwise be stored twice.
    """
    known_ids: set[str] = set()
    answered: set[str] = set()
    if thread is not None:
        values, _ = lg_state.thread_values(thread)
        for item in (values or {}).get("messages") or [] if isinstance(values, dict) else []:
            if isinstance(item, dict):
                known_ids.add(str(item.get("id")))
                if item.get("type") == "tool" and item.get("tool_call_id"):
                    answered.add(str(item["tool_call_id"]))
    out = []
    for message in body.messages:
        converted = _langchain_message(message)
        if converted is None or converted["id"] in known_ids:
            continue
        if converted["role"] == "tool" and converted["tool_call_id"] in answered:
            continue
        out.append(converted)
    return out


def _graph_input(thread: Thread | None, body: RunAgentInput) -> dict[str, Any]:
    data: dict[str, Any] = dict(body.state) if isinstance(body.state, dict) else {}
    data["messages"] = _new_messages(thread, body)
    data["tools"] = [tool.model_dump(mode="json", by_alias=True) for tool in body.tools or []]
    data["ag-ui"] = {
        "context": [c.model_dump(mode="json", by_alias=True) for c in body.context or []],
        "forwarded_props": body.forwarded_props,
    }
    return data


def _client_tool_answers(thread: Thread, body: RunAgentInput) -> dict[str, Any]:
    """Tool messages in the input that answer pending client-tool interrupts."""
    pending = {
        agui.interrupt_tool_call_id(row): row
        for row in thread.interrupts.pending()
        if isinstance(row.raw_value, dict) and row.raw_value.get("client_tool")
    }
    answers = {}
    for message in body.messages:
        if getattr(message, "role", None) == "tool" and message.tool_call_id in pending:
            answers[str(pending[message.tool_call_id].pk)] = _text(message.content)
    return answers


def start_run(*, user, graph: str, body: RunAgentInput, thread_id: uuid.UUID) -> Run:
    """Start or resume the run an AG-UI input asks for (one transaction)."""
    decision_resume.check_storable([body.thread_id, body.run_id], "threadId and runId")
    with transaction.atomic():
        thread = Thread.objects.filter(pk=thread_id).one_or_none()
        if thread is not None:
            if not user_can_view_thread(user, thread):
                raise errors.NotFound(f"Thread {body.thread_id} not found.")
            thread_graph_check(thread=thread, graph=graph)
        if body.resume:
            if thread is None:
                raise errors.NotFound(f"Thread {body.thread_id} has nothing to resume.")
            entries = {
                entry.interrupt_id: decision_resume.CANCELLED
                if entry.status == "cancelled"
                else entry.payload
                for entry in body.resume
            }
            run = decision_resume.resume_entries(thread=thread, user=user, entries=entries)
        elif thread is not None and thread.interrupts.pending().exists():
            answers = _client_tool_answers(thread, body)
            if not answers:
                raise errors.Conflict(
                    "The thread is waiting for interrupts; answer them with `resume` entries."
                )
            run = decision_resume.resume_entries(thread=thread, user=user, entries=answers)
        else:
            run = lg_services.run_create(
                user=user,
                assistant_id=graph,
                thread=thread,
                input=_graph_input(thread, body),
                request=lg_services.RunRequest(new_thread_id=None if thread else thread_id),
            )
        run.metadata = {**run.metadata, "agui": {"threadId": body.thread_id, "runId": body.run_id}}
        run.save(update_fields=["metadata"])
    return run


# --- output -----------------------------------------------------------------------


def _final_event(run: Run, body: RunAgentInput) -> Any:
    ids = {"thread_id": body.thread_id, "run_id": body.run_id}
    if run.status == Run.Status.ERROR:
        return RunErrorEvent(message=error_line(run.error), code="run_error")
    if run.status == Run.Status.CANCELLED:
        return RunFinishedEvent(**ids, outcome=RunFinishedCancelledOutcome())
    if run.status == Run.Status.INTERRUPTED:
        rows = (
            HumanInterrupt.objects.filter(run=run, status=HumanInterrupt.Status.PENDING)
            .select_related("reviewer_group")
            .in_order()
        )
        items = [agui.interrupt_item(row) for row in rows]
        if items:
            return RunFinishedEvent(**ids, outcome=RunFinishedInterruptOutcome(interrupts=items))
        # Answered already (by a reviewer, in the meantime): the thread moved on.
        return RunFinishedEvent(**ids, outcome=RunFinishedSuccessOutcome())
    if run.status == Run.Status.SUCCESS:
        return RunFinishedEvent(**ids, result=run.final_result, outcome=RunFinishedSuccessOutcome())
    return RunErrorEvent(message=f"The run is still {run.status}.", code="timeout")


async def _events(sub: ThreadSubscription, run: Run, body: RunAgentInput, timeout: float):
    encoder = EventEncoder()
    run_id = str(run.pk)

    def encode(event: Any) -> bytes:
        if event.timestamp is None:
            event.timestamp = int(time.time() * 1000)
        return encoder.encode(event).encode()

    try:
        yield encode(
            RunStartedEvent(
                thread_id=body.thread_id,
                run_id=body.run_id,
                metadata={"hitlThreadId": str(run.thread_id), "hitlRunId": run_id},
            )
        )
        async for event in run_events_of(sub, run_id, timeout):
            kind = (event or {}).get("type")
            if kind not in FORWARDED:
                continue
            try:
                parsed = EVENT.validate_python(event)
            except ValidationError:
                log.warning("dropping an event that is not valid AG-UI: %s", kind)
                continue
            yield encode(parsed)
        final = await fetch_run(run_id)
        if final is None:
            yield encode(RunErrorEvent(message="The run no longer exists.", code="not_found"))
            return
        yield encode(await released(_final_event)(final, body))
    except Exception as exc:  # the stream has started: report as RUN_ERROR, never hang
        log.exception("AG-UI stream for run %s failed", run_id)
        yield encode(RunErrorEvent(message=f"The event stream failed: {exc}", code="stream_error"))
    finally:
        await sub.close()


SSE_RESPONSE = sse_response(
    "Server-sent AG-UI events: RUN_STARTED … RUN_FINISHED or RUN_ERROR.",
    {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"enum": [kind.value for kind in EventType]}},
    },
)


@api.get("/", response={200: list[dict], 401: Error}, tags=["ag-ui"])
def agents(request):
    """The graphs an AG-UI client can run, one endpoint each."""
    return [
        {"name": name, "path": f"{request.path.rstrip('/')}/{name}"} for name in registry.names()
    ]


@api.post(
    "/{graph}",
    response={200: dict, 422: dict, **ERRORS},
    tags=["ag-ui"],
    openapi_extra=SSE_RESPONSE,
)
async def run_agent(request, graph: str, body: RunAgentInput):
    """Run (or resume) `graph` for an AG-UI RunAgentInput; answers an SSE stream of AG-UI events."""
    if graph not in registry.targets:
        raise errors.NotFound(f"No agent {graph!r}; available: {', '.join(registry.names())}.")
    user = request.user
    thread_id = await sync_to_async(thread_uuid)(user, body.thread_id)
    # Listen before the run exists so none of its events can be missed.
    sub = await ThreadSubscription(thread_id).open()
    try:
        run = await released(start_run)(user=user, graph=graph, body=body, thread_id=thread_id)
    except BaseException:
        await sub.close()
        raise
    response = StreamingHttpResponse(
        _events(sub, run, body, settings.HITL_API_WAIT_SECONDS),
        content_type=EventEncoder().get_content_type(),
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response
