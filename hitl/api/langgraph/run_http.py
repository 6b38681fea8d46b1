"""The HTTP side of a /langgraph run: the paths it is named by, the stream modes a query
asks for, its server-sent event response (with cancel on disconnect), and the response of
a wait or join that outlives a web restart."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse
from ninja.renderers import JSONRenderer

from hitl.api.langgraph.streaming import STREAM_MODES, in_background, run_events
from hitl.core import errors, runs
from hitl.core.db.retry import retry_transient
from hitl.core.live import eventlog
from hitl.core.live.waiting import ThreadSubscription, released
from hitl.core.models import Run

log = logging.getLogger(__name__)


def wait_seconds(requested: float | None = None) -> float:
    limit = settings.HITL_API_WAIT_SECONDS
    return limit if requested is None else max(0.0, min(requested, limit))


def name_run(request: HttpRequest, response, run: Run) -> None:
    # Paths under the API root, as LangGraph Server sends them: the JS SDK prefixes its
    # base URL to them and httpx joins them to the Python SDK's. Location is what the
    # SDKs reconnect to (GET, with Last-Event-ID) when a stream drops.
    path = f"/threads/{run.thread_id}/runs/{run.pk}"
    response["Content-Location"] = path
    response["Location"] = f"{path}/stream"


def join_path(run: Run) -> str:
    return f"/threads/{run.thread_id}/runs/{run.pk}/join"


# A newline this often keeps a wait's connection (and any proxy on the way) open.
WAIT_HEARTBEAT_SECONDS = 5.0


def waiting_response(
    request: HttpRequest,
    run: Run,
    finished: Callable[[], Awaitable[Run | None]],
    answer: Callable[[Run], Awaitable[dict[str, Any]]],
    *,
    close: Callable[[], Awaitable[Any]] | None = None,
    on_disconnect: Callable[[], Any] | None = None,
) -> StreamingHttpResponse:
    """A wait or join of a run still going, as LangGraph Server answers one: the headers at
    once, with the run's `/join` as `Location`, a newline every few seconds, then the
    answer as JSON. A client whose body is cut off (a web restart) reconnects to the
    Location (langgraph_sdk's `join` and `wait` do) and gets the answer from there.
    Past the wait limit, or when the run is deleted meanwhile, the answer is
    `{"__error__": {error, message}}`, as LangGraph Server puts errors in a wait's body.
    `close` (a subscription the wait listens on) runs once the body is over;
    `on_disconnect` (`on_disconnect="cancel"`) if the client left before the answer."""

    async def body():
        waiting = asyncio.ensure_future(finished())
        answered = False
        try:
            yield b"\n"  # sends the headers: the client knows where to come back
            while not (await asyncio.wait({waiting}, timeout=WAIT_HEARTBEAT_SECONDS))[0]:
                yield b"\n"
            final = waiting.result()
            if final is None:
                output = _wait_error("NotFound", "The run no longer exists.")
            elif final.status not in Run.TERMINAL:
                output = _wait_error(
                    "TimeoutError",
                    f"The run is still {final.status} after {wait_seconds():.0f}s; "
                    "join it again later.",
                )
            else:
                output = await answer(final)
            answered = True
            yield JSONRenderer().render(request, output, response_status=200)
        finally:
            waiting.cancel()  # the client left: stop waiting for it
            await asyncio.gather(waiting, return_exceptions=True)
            if not answered and on_disconnect is not None:
                on_disconnect()
            if close is not None:
                await close()

    response = StreamingHttpResponse(body(), content_type="application/json")
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    response["Content-Location"] = f"/threads/{run.thread_id}/runs/{run.pk}"
    response["Location"] = join_path(run)
    return response


def _wait_error(error: str, message: str) -> dict[str, Any]:
    return {"__error__": {"error": error, "message": message}}


def query_modes(values: list[str] | None, allowed=STREAM_MODES) -> list[str]:
    """`stream_mode` query values as LangGraph Server reads them: repeated, a JSON array,
    or empty (langgraph_sdk's default `stream_mode=`): [] means the run's own modes."""
    modes: list[str] = []
    for value in values or ():
        if value.startswith("["):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                modes.extend(str(m) for m in parsed)
                continue
        if value:
            modes.append(value)
    unknown = sorted({m for m in modes if m not in allowed})
    if unknown:
        raise ModeError(
            f"Unknown stream_mode {', '.join(map(repr, unknown))}; use {', '.join(allowed)}."
        )
    return modes


class ModeError(errors.ServiceError):
    status_code = 422


async def run_modes(run: Run) -> list[str]:
    """The modes a run was started with (a join or reconnect that names none gets them)."""
    return list(run.stream_modes or await sync_to_async(eventlog.saved_modes)(run.pk) or [])


@retry_transient
def _cancel_if_running(run_id, user) -> None:
    """Cancel a run whose streaming client left (LangGraph's on_disconnect="cancel")."""
    run = Run.objects.select_related("thread").filter(pk=run_id).one_or_none()
    if run is None or run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
        return
    try:
        runs.thread_cancel(thread=run.thread, user=user)
        log.info("run %s cancelled: its client disconnected", run_id)
    except errors.Forbidden:
        log.info("run %s: its client disconnected but may not cancel it", run_id)


def cancel_when_gone(run_id, user) -> None:
    """Cancel the run of a client that left a wait with on_disconnect="cancel"."""
    in_background(partial(released(_cancel_if_running), run_id, user))


async def stream_began(request, thread_id) -> str | None:
    """Where in the thread's event log a new stream begins: read before it subscribes,
    so every part it may get comes after. None for a resumed stream (it sends no
    metadata, whose id this is)."""
    if request.headers.get("Last-Event-ID"):
        return None
    return await sync_to_async(eventlog.last_entry)(thread_id)


async def stream_response(
    request,
    sub: ThreadSubscription,
    run: Run,
    stream_mode,
    *,
    cancel_on_disconnect=False,
    whole_run=False,
    began_after: str | None = None,
) -> StreamingHttpResponse:
    last_event_id = request.headers.get("Last-Event-ID") or None
    on_disconnect = None
    if cancel_on_disconnect:
        user = request.user
        on_disconnect = partial(released(_cancel_if_running), run.pk, user)
    if not stream_mode:
        # A join or a reconnect (the SDKs GET the Location) naming no modes: the run's own.
        stream_mode = await run_modes(run)
    response = StreamingHttpResponse(
        run_events(
            sub=sub,
            run=run,
            stream_mode=stream_mode,
            timeout=wait_seconds(),
            last_event_id=last_event_id,
            on_disconnect=on_disconnect,
            whole_run=whole_run,
            began_after=began_after,
        ),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    name_run(request, response, run)
    return response
