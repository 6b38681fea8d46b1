"""A LangGraph Server API subset, so langgraph_sdk and the Agent Inbox work unchanged.

Mounted at /langgraph/ (point `get_client(url=".../langgraph", api_key=token)` at it).
Assistants are the registered graphs and their stored variants; threads and runs are
our Thread and Run rows; `interrupts` the pending HumanInterrupts; state and history come
from the checkpointer. `wait`, `join` and `stream` follow runs on the workers.

Auth: the same per-user API tokens as /api/v1 (`x-api-key`, as langgraph_sdk sends
it, or `Authorization: Bearer`), or the browser session; the same permissions as
the UI. Errors are JSON {"detail": "..."} with a 4xx status.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any, Literal

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Query, Router
from ninja.security import SessionAuth

from hitl.api.errors import ERRORS, BoundedParser, install_error_handlers
from hitl.api.langgraph import assistants, crons, protocol_v2, serializers, threads
from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph import store as lg_store
from hitl.api.langgraph.run_create import create_run
from hitl.api.langgraph.run_http import (
    cancel_when_gone,
    name_run,
    query_modes,
    run_modes,
    stream_began,
    stream_response,
    wait_seconds,
    waiting_response,
)
from hitl.api.langgraph.schemas import MAX_OFFSET, RunCreateIn, RunField, RunsCancelIn
from hitl.api.langgraph.streaming import STREAM_MODES
from hitl.api.langgraph.threads import SELECT_QUERY, thread_for
from hitl.api.sse import sse_response
from hitl.api.tokens import TokenBearer, TokenHeader
from hitl.core import errors
from hitl.core.db.retry import retry_transient
from hitl.core.live.events import RunEnd
from hitl.core.live.waiting import ThreadSubscription, released, wait_for_run
from hitl.core.models import Run
from hitl.core.threads import verbs as thread_verbs

log = logging.getLogger(__name__)


class SessionWithoutToken(SessionAuth):
    """The browser session (CSRF-checked), only for requests that carry no token.

    So a wrong token is a 401, not a CSRF failure of the session fallback.
    """

    def __call__(self, request):
        if request.headers.get("x-api-key") or request.headers.get("authorization"):
            return None
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        return super().__call__(request)


AUTH = [TokenHeader(), TokenBearer(), SessionWithoutToken()]

api = NinjaAPI(
    title="HITL LangGraph-compatible API",
    version="1",
    description=__doc__,
    urls_namespace="langgraph-api",
    auth=AUTH,
    parser=BoundedParser(),
)


install_error_handlers(api, auth_hint="send an API token (x-api-key: …).")
# URL patterns are matched in mount order (path ids are plain strings, so a literal
# path must come before the id that would take it): the meta routes (the default
# router's), then the threads', then the runs' below, then the rest.
run_routes = Router()
api.add_router("/threads", threads.router)
api.add_router("", run_routes)
api.add_router("/assistants", assistants.router)
api.add_router("/store", lg_store.router)
api.add_router("/runs/crons", crons.router)
api.add_router("/threads", protocol_v2.router)


# --- helpers --------------------------------------------------------------------


@retry_transient  # reads: safe to repeat
def _run_for(request: HttpRequest, thread_id: uuid.UUID, run_id: uuid.UUID) -> Run:
    thread = thread_for(request, thread_id)
    run = Run.objects.select_related("thread").filter(pk=run_id, thread=thread).one_or_none()
    if run is None:
        raise errors.NotFound(f"Run {run_id} not found.")
    return run


@retry_transient
def _latest_run(request: HttpRequest, thread_id: uuid.UUID) -> Run | None:
    return thread_for(request, thread_id).runs.order_by("-created_at").first()


# A thread stream also takes "run_modes": the modes its run was started with.
THREAD_STREAM_MODES = (*STREAM_MODES, "run_modes")

# Repeated `?stream_mode=` query parameters (a list would otherwise be read from a body).
MODES_QUERY = Query(None)


async def _start_and_stream(request, body: RunCreateIn, thread_id, *, stateless: bool):
    thread_id = thread_id or uuid.uuid4()
    began = await stream_began(request, thread_id)
    # Listen before the run exists: its first events cannot be missed.
    sub = await ThreadSubscription(thread_id).open()
    try:
        run = await released(create_run)(request, body, thread_id, stateless=stateless)
    except BaseException:
        await sub.close()
        raise
    gone = body.on_disconnect == "cancel"
    return await stream_response(
        request,
        sub,
        run,
        body.stream_mode,
        cancel_on_disconnect=gone,
        whole_run=True,
        began_after=began,
    )


async def _start_and_wait(request, body: RunCreateIn, thread_id, *, stateless: bool):
    thread_id = thread_id or uuid.uuid4()
    # Listen before the run exists: its end cannot be missed.
    sub = await ThreadSubscription(thread_id, status_only=True).open()
    try:
        # The answer is the run's end: nothing of its stream is kept for it.
        run = await released(create_run)(
            request, body, thread_id, stateless=stateless, streamed=False
        )
    except BaseException:
        await sub.close()
        raise

    finished = partial(
        wait_for_run,
        run.pk,
        wait_seconds(),
        subscription=sub,
        known=run,
        fetch=_fetch_finished,
        ended=partial(_announced_end, thread_id),
    )
    gone = (
        partial(cancel_when_gone, run.pk, request.user) if body.on_disconnect == "cancel" else None
    )
    return waiting_response(
        request, run, finished, _wait_output, close=sub.close, on_disconnect=gone
    )


def _read_finished(run_id) -> Run | None:
    """The run, with its wait answer prepared once it is terminal (one hop for both)."""
    run = Run.objects.select_related("thread").filter(pk=run_id).one_or_none()
    if run is not None and run.status in Run.TERMINAL:
        run.wait_output = serializers.run_output(run)
    return run


_fetch_finished = released(_read_finished)


def _announced_end(thread_id, end: RunEnd) -> Run:
    """The run as its worker announced its end, with the wait answer (nothing read)."""
    run = Run(pk=end["run_id"], thread_id=thread_id, status=end["status"])
    run.wait_output = serializers.output_of(run, end["values"], end["interrupts"])
    return run


async def _wait_output(run: Run) -> dict[str, Any]:
    output = getattr(run, "wait_output", None)
    if output is None:
        output = await released(serializers.run_output)(run)
    return output


async def _finished_output(request, run: Run):
    """The answer of a wait or join for a run that has ended."""
    response = api.create_response(request, await _wait_output(run), status=200)
    name_run(request, response, run)
    return response


SSE_RESPONSE = sse_response("Server-sent events: metadata, then the requested stream modes.")


# --- meta -----------------------------------------------------------------------


@api.get("/info", auth=None, response=dict, tags=["meta"])
def info(request):
    return {
        "version": "hitl-1",
        "langgraph_py_version": "1",
        "flags": {"assistants": True, "crons": True, "store": True, "langsmith": False},
        "host": {"kind": "hitl"},
    }


@api.get("/ok", auth=None, response=dict, tags=["meta"])
def ok(request):
    return {"ok": True}


# --- runs -----------------------------------------------------------------------


@run_routes.post("/threads/{thread_id}/runs", response={200: dict, **ERRORS}, tags=["runs"])
def runs_create(request, response: HttpResponse, thread_id: uuid.UUID, body: RunCreateIn):
    run = create_run(request, body, thread_id, stateless=False)
    name_run(request, response, run)
    # The run as created (LangGraph answers "pending"), not as a worker may have it now.
    return serializers.run_json(run)


@run_routes.post("/runs", response={200: dict, **ERRORS}, tags=["runs"])
def runs_create_stateless(request, response: HttpResponse, body: RunCreateIn):
    run = create_run(request, body, None, stateless=True)
    name_run(request, response, run)
    return serializers.run_json(run)


# Literal paths before /runs/{run_id}: path ids are plain strings (validated as UUIDs
# by the schema, so a bad id is a JSON 422, not an HTML 404), matched in this order.
@run_routes.post("/threads/{thread_id}/runs/wait", response={200: dict, **ERRORS}, tags=["runs"])
async def runs_wait(request, thread_id: uuid.UUID, body: RunCreateIn):
    return await _start_and_wait(request, body, thread_id, stateless=False)


@run_routes.post(
    "/threads/{thread_id}/runs/stream",
    response={200: dict, **ERRORS},
    tags=["runs"],
    openapi_extra=SSE_RESPONSE,
)
async def runs_stream(request, thread_id: uuid.UUID, body: RunCreateIn):
    return await _start_and_stream(request, body, thread_id, stateless=False)


@run_routes.get("/threads/{thread_id}/runs", response={200: list[dict], **ERRORS}, tags=["runs"])
def runs_list(
    request,
    thread_id: uuid.UUID,
    limit: int = Query(10, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    status: Literal["pending", "running", "error", "success", "timeout", "interrupted"]
    | None = None,
    select: list[RunField] | None = SELECT_QUERY,
):
    thread = thread_for(request, thread_id)
    runs = thread.runs.order_by("-created_at")
    if status:
        runs = runs.filter(status__in=serializers.RUN_STATUS_FILTER[status])
    page = runs[offset : offset + limit]
    return [serializers.selected(serializers.run_json(r, thread.graph), select) for r in page]


# Before /threads/{thread_id}/runs/{run_id}, which would take "crons" for a run id.
@run_routes.post("/threads/{thread_id}/runs/crons", response={200: dict, **ERRORS}, tags=["crons"])
def thread_crons_create(request, thread_id: uuid.UUID, body: crons.CronCreateIn):
    """Schedule runs of an assistant on this thread (a tick while it is busy is skipped)."""
    return crons.create_cron(request, body, thread_id)


@run_routes.get("/threads/{thread_id}/runs/{run_id}", response={200: dict, **ERRORS}, tags=["runs"])
def runs_get(request, thread_id: uuid.UUID, run_id: uuid.UUID):
    return serializers.run_json(_run_for(request, thread_id, run_id))


@run_routes.delete(
    "/threads/{thread_id}/runs/{run_id}", response={204: None, **ERRORS}, tags=["runs"]
)
def runs_delete(request, thread_id: uuid.UUID, run_id: uuid.UUID):
    thread_verbs.run_delete(run=_run_for(request, thread_id, run_id), user=request.user)
    return 204, None


@run_routes.post("/runs/cancel", response={204: None, **ERRORS}, tags=["runs"])
def runs_cancel_many(
    request, body: RunsCancelIn, action: Literal["interrupt", "rollback"] = "interrupt"
):
    if body.status and (body.thread_id or body.run_ids):
        raise errors.Invalid("Send either status, or thread_id with run_ids, not both.")
    if not body.status and not (body.thread_id and body.run_ids):
        raise errors.Invalid("Send status, or thread_id with run_ids.")
    thread = thread_for(request, body.thread_id) if body.thread_id else None
    if action == "rollback":
        if thread is None:
            raise errors.Invalid("Rollback names its runs: send thread_id with run_ids.")
        for run in thread.runs.active().filter(pk__in=body.run_ids):
            lg_services.run_cancel(run=run, user=request.user, action="rollback")
        return 204, None
    thread_verbs.runs_cancel_many(
        user=request.user, thread=thread, run_ids=body.run_ids, status=body.status or ""
    )
    return 204, None


@run_routes.post(
    "/threads/{thread_id}/runs/{run_id}/cancel", response={200: dict, **ERRORS}, tags=["runs"]
)
def runs_cancel(
    request,
    thread_id: uuid.UUID,
    run_id: uuid.UUID,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
):
    # Cancelling is immediate (the run row is marked at once), so `wait` needs no waiting.
    run = lg_services.run_cancel(
        run=_run_for(request, thread_id, run_id), user=request.user, action=action
    )
    return serializers.run_json(run)


@run_routes.get(
    "/threads/{thread_id}/runs/{run_id}/join",
    response={200: dict, **ERRORS},
    tags=["runs"],
)
async def runs_join(request, thread_id: uuid.UUID, run_id: uuid.UUID):
    run = await released(_run_for)(request, thread_id, run_id)
    if run.status in Run.TERMINAL:
        return await _finished_output(request, run)
    return waiting_response(
        request,
        run,
        partial(wait_for_run, run.pk, wait_seconds(), fetch=_fetch_finished),
        _wait_output,
    )


@run_routes.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    response={200: dict, **ERRORS},
    tags=["runs"],
    openapi_extra=SSE_RESPONSE,
)
async def runs_join_stream(
    request,
    thread_id: uuid.UUID,
    run_id: uuid.UUID,
    stream_mode: list[str] | None = MODES_QUERY,
    cancel_on_disconnect: bool = False,
):
    stream_mode = query_modes(stream_mode)
    began = await stream_began(request, thread_id)
    sub = await ThreadSubscription(thread_id).open()
    try:
        run = await released(_run_for)(request, thread_id, run_id)
    except BaseException:
        await sub.close()
        raise
    return await stream_response(
        request,
        sub,
        run,
        stream_mode,
        cancel_on_disconnect=cancel_on_disconnect,
        began_after=began,
    )


@run_routes.get(
    "/threads/{thread_id}/stream",
    response={200: dict, **ERRORS},
    tags=["threads"],
    openapi_extra=SSE_RESPONSE,
)
async def threads_join_stream(
    request,
    thread_id: uuid.UUID,
    stream_mode: list[str] | None = MODES_QUERY,
):
    """Follow the thread's current run (or its latest one) in the requested modes;
    `run_modes` (langgraph_sdk's default) in the modes that run was started with."""
    stream_mode = query_modes(stream_mode, THREAD_STREAM_MODES)
    began = await stream_began(request, thread_id)
    sub = await ThreadSubscription(thread_id).open()
    try:
        run = await released(_latest_run)(request, thread_id)
        if run is None:
            raise errors.NotFound("The thread has no run to follow yet.")
    except BaseException:
        await sub.close()
        raise
    if stream_mode and "run_modes" in stream_mode:
        stream_mode = [m for m in stream_mode if m != "run_modes"] + await run_modes(run)
    return await stream_response(request, sub, run, stream_mode, began_after=began)


# A batch is one request: bounded like any other body.
MAX_BATCH = 100


@run_routes.post("/runs/batch", response={200: list[dict], **ERRORS}, tags=["runs"])
def runs_create_batch(request, body: list[RunCreateIn]):
    """Start several stateless runs (each on a new thread): all of them, or none."""
    if not 0 < len(body) <= MAX_BATCH:
        raise errors.Invalid(f"Send from 1 to {MAX_BATCH} runs.")
    with transaction.atomic():
        runs = [create_run(request, item, None, stateless=True) for item in body]
    return [serializers.run_json(run) for run in runs]


@run_routes.post("/runs/wait", response={200: dict, **ERRORS}, tags=["runs"])
async def runs_wait_stateless(request, body: RunCreateIn):
    return await _start_and_wait(request, body, None, stateless=True)


@run_routes.post(
    "/runs/stream", response={200: dict, **ERRORS}, tags=["runs"], openapi_extra=SSE_RESPONSE
)
async def runs_stream_stateless(request, body: RunCreateIn):
    return await _start_and_stream(request, body, None, stateless=True)
