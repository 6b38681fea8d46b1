"""The only bridge that runs a graph for Django: lease a run, stream it, record the end.

A run of a thread mirrored from another deployment is routed there instead. The Celery
tasks that call in are in hitl.core.worker.tasks; the graph's input in graph_input."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.conf import settings
from django.db import connection

from agents.ledger import LEDGER_KEY
from agents.paths import FILES_KEY
from hitl import logcontext
from hitl.core.errors import is_transient
from hitl.core.files import artifacts
from hitl.core.files.storage import thread_files
from hitl.core.live import agui, events, listeners
from hitl.core.live.agui import jsonable
from hitl.core.live.batches import EventBatches
from hitl.core.models import REMOTE_GRAPH_PREFIX, Run
from hitl.core.registry import registry
from hitl.core.runs.config import graph_config, graph_context
from hitl.core.worker import lease, pauses_record
from hitl.core.worker.engine import Hold, engine, leases
from hitl.core.worker.graph_input import (
    ALREADY_DONE,
    Breakpoint,
    afrom_checkpoint,
    agraph_input_for,
    check_ended,
)
from hitl.core.worker.ledger import ThreadToolLedger

log = logging.getLogger(__name__)

_UNSEEN = object()
# The key LangGraph's stream chunks carry a pause's interrupts under.
INTERRUPT = "__interrupt__"


# A run of a thread mirrored from another deployment is delivered there, not run here;
# the deliverer lives in hitl.core.remote (above this room) and is handed over in apps.py.
_remote: dict[str, Callable[..., tuple[str, float]]] = {}


def use_remote(*, deliver: Callable[..., tuple[str, float]]) -> None:
    _remote["deliver"] = deliver


def _deliver_remote(run: Run, worker: str) -> tuple[str, float]:
    try:
        return _remote["deliver"](run, worker=worker)
    except Exception as exc:
        if is_transient(exc):
            connection.close()
            with contextlib.suppress(Exception):
                lease.run_release(run_id=run.pk, worker=worker)
            return "retry", TRANSIENT_RETRY_SECONDS
        log.exception("run %s could not be delivered", run.pk)
        lease.run_fail(run_id=run.pk, worker=worker, error="".join(traceback.format_exception(exc)))
        return "error", 0.0


def _schema_json(schema: Any) -> dict[str, Any] | None:
    if schema is None or isinstance(schema, dict):
        return schema
    from pydantic import TypeAdapter

    try:
        return TypeAdapter(schema).json_schema()
    except Exception:
        return None


class _StreamEnd:
    """How a run ended, read from its own stream instead of a checkpoint read after it.

    A stream that returns without raising has either reached the graph's end or paused;
    its last "values" chunk is the state it ended with (pending writes of a paused
    step's finished tasks included, as `get_state` shows them), and its "updates"
    chunks carry the pause's interrupts. Only the plain cases are taken from here: no
    values seen (nothing ran, or no step changed the state), more than one interrupt
    (their order is the tasks' finishing order, not the checkpoint's) or a breakpoint
    with no interrupt leave it unknown, and the checkpoint is read as before.
    """

    def __init__(self) -> None:
        self.values: Any = _UNSEEN
        self.interrupts: list[Any] = []
        self.breakpoint = False

    def note(self, mode: str, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        if mode == "values":
            self.values = {k: v for k, v in chunk.items() if k != INTERRUPT}
        elif mode == "updates" and INTERRUPT in chunk:
            paused = chunk[INTERRUPT]
            self.breakpoint = self.breakpoint or not paused
            self.interrupts.extend(i for i in paused if i.id not in {p.id for p in self.interrupts})

    def known(self) -> bool:
        return self.values is not _UNSEEN and not self.breakpoint and len(self.interrupts) <= 1


# While nobody listens to a run's stream, how often the worker looks again.
LISTEN_RECHECK_SECONDS = 1.0

# After a transient fault, how long before the run is tried again.
TRANSIENT_RETRY_SECONDS = 1.0

_CANCELLED = object()


async def _chunks(
    graph: Any,
    graph_input: Any,
    config: dict[str, Any],
    *,
    modes: list[str],
    subgraphs: bool,
    events_of: uuid.UUID | None,
    **kwargs: Any,
) -> AsyncIterator[tuple[tuple[str, ...], str, Any]]:
    """The run's stream as (namespace, mode, chunk); `kwargs` go to astream (context,
    breakpoints).

    With `events_of` (the run's id; a client asked for the `events` mode) the graph
    runs with `astream_events` v2 as LangGraph Server runs it: the root's
    `on_chain_stream` events carry the stream modes' chunks, and every other event
    is an "events" chunk of its own.
    """
    if events_of is None:
        async for item in graph.astream(
            graph_input,
            config,
            stream_mode=modes,
            durability="sync",
            subgraphs=subgraphs,
            **kwargs,
        ):
            yield item if subgraphs else ((), *item)
        return
    root = str(events_of)
    async for event in graph.astream_events(
        graph_input,
        {**config, "run_id": events_of},
        version="v2",
        stream_mode=modes,
        durability="sync",
        subgraphs=subgraphs,
        **kwargs,
    ):
        if "langsmith:hidden" in (event.get("tags") or ()):
            continue
        if event["event"] == "on_chain_stream" and event["run_id"] == root:
            chunk = event["data"]["chunk"]
            yield chunk if subgraphs else ((), *chunk)
        else:
            yield (), agui.EVENTS, event


async def _stream_run(
    graph: Any,
    config: dict[str, Any],
    run: Run,
    hold: Hold,
    listened: bool,
) -> Any:
    """Stream the run on the engine's loop: (interrupts, values), or _CANCELLED.

    Runs on the engine's loop; its events are logged and sent in batches on the loop
    (hitl.core.live.batches), all of them before this returns, and the database is
    not touched here (the checkpointer's own async pool aside).
    """
    hold.attach()
    loop = asyncio.get_running_loop()
    thread_id = run.thread_id
    out = EventBatches(thread_id)
    # The lease read that the thread has no checkpoint: the graph's first read need not.
    saver = graph.checkpointer if run.checkpointless else None
    if not hasattr(saver, "expect_empty"):
        saver = None
    else:
        saver.expect_empty(str(thread_id))
    try:
        async with asyncio.timeout(settings.HITL_RUN_TIME_LIMIT):
            if run.checkpoint_id:
                config = await afrom_checkpoint(graph, config, run)
            graph_input = await agraph_input_for(graph, config, run)
            checked = time.monotonic()
            ended = _StreamEnd()
            if graph_input is not ALREADY_DONE:
                # A /langgraph client's own modes: only for runs started with them, from
                # the run's start whoever listens (a join may come at any moment).
                client_modes = agui.client_modes(run.stream_modes)
                subgraphs = bool(client_modes) and run.stream_subgraphs
                modes = agui.astream_modes(client_modes, thread_stream=listened)
                stream = _chunks(
                    graph,
                    graph_input,
                    config,
                    modes=modes,
                    subgraphs=subgraphs,
                    events_of=run.pk if agui.EVENTS in client_modes else None,
                    context=graph_context(graph, run.context),
                    interrupt_before=run.breakpoints.get("before"),
                    interrupt_after=run.breakpoints.get("after"),
                )
                async for ns, mode, chunk in stream:
                    if not ns:
                        ended.note(mode, chunk)
                    if not listened and time.monotonic() - checked >= LISTEN_RECHECK_SECONDS:
                        listened = await loop.run_in_executor(
                            None, listeners.thread_stream_listened, thread_id
                        )
                        checked = time.monotonic()
                    if listened:
                        batch = list(agui.events_for_chunk(mode, chunk) if not ns else ())
                        batch += agui.client_chunk_events(ns, mode, chunk, client_modes)
                    else:
                        batch = agui.client_chunk_events(
                            ns, mode, chunk, client_modes, thread_stream=False
                        )
                    if batch:
                        out.add(batch)
            if hold.lost:
                return _CANCELLED
            if ended.known():
                return ended.interrupts, ended.values
            state = await graph.aget_state(config)
            if run.breakpoints and not state.interrupts and state.next:
                return [Breakpoint(state)], state.values
            check_ended(state)
            return state.interrupts, state.values
    except asyncio.CancelledError:
        if hold.lost:
            return _CANCELLED
        raise
    except TimeoutError as exc:
        raise RuntimeError(
            f"The run took longer than HITL_RUN_TIME_LIMIT ({settings.HITL_RUN_TIME_LIMIT} s)."
        ) from exc
    finally:
        hold.streaming = False
        if saver is not None:
            saver.forget_empty(str(thread_id))
        await out.close()  # before the run's end is recorded and announced


def _release_connection() -> None:
    """Hand this thread's pooled connection back while the run streams.

    Many runs wait on one process's loop; their threads must not each hold one of the
    pool's few connections meanwhile. SQLite connections (no pool) and a test's open
    transaction stay.
    """
    if (
        connection.connection is not None
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
    ):
        connection.close()


def execute_run(run_id: str, *, worker: str) -> tuple[str, float]:
    """Run or continue one run. Returns (outcome, retry_after_seconds).

    Called on the thread that took the run (a Celery task thread, the embedded
    server's run thread); the graph streams on this process's engine loop meanwhile.
    """
    if not leases.reserve(run_id):
        # A duplicate delivery of a run this process is executing right now.
        return "busy", float(settings.HITL_RUN_LEASE_SECONDS)
    try:
        return _execute_run(run_id, worker=worker)
    finally:
        leases.unreserve(run_id)


def _execute_run(run_id: str, *, worker: str) -> tuple[str, float]:
    try:
        # An enqueued run waits for the runs before it on its thread (double-texting).
        run, retry_after = lease.run_lease_take(
            run_id=run_id, worker=worker, checkpoints=engine.checkpoints_beside_runs()
        )
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("run %s could not be leased (%s); it will be retried", run_id, exc)
        connection.close()
        return "retry", TRANSIENT_RETRY_SECONDS
    if run is None:
        return ("busy" if retry_after else "skipped"), retry_after
    thread = run.thread
    logcontext.bind(thread_id=thread.pk, run_id=run.pk)
    if thread.graph.startswith(REMOTE_GRAPH_PREFIX) and "deliver" in _remote:
        return _deliver_remote(run, worker)
    # The run's own config (a /langgraph client's, merged over its assistant's), with
    # HITL's keys on top. The file store is an object, so it is never checkpointed.
    config = graph_config(
        run.config,
        {
            "thread_id": str(thread.pk),
            FILES_KEY: thread_files(thread.pk),
            LEDGER_KEY: ThreadToolLedger(thread.pk),
        },
        {"hitl_run_id": str(run.pk), "hitl_thread_id": str(thread.pk)},
    )
    hold = leases.hold(str(run.pk), worker)
    started = time.monotonic()
    try:
        graph = registry.get(thread.graph, engine.saver(), engine.store())
        # Stream events, the run's start and end included, are built and sent only while
        # someone listens (waiters hear of the end through the thread's status group).
        # API streams listen before their run exists; a page opened mid-run is noticed
        # at the next step (it then gets steps; messages and snapshots from the next run).
        # A /langgraph run streams the modes it was started with from its start, whoever
        # listens now: a join or reconnect may come at any moment and must get them all;
        # what only the thread stream reads is built while someone listens to it.
        if run.stream_modes:  # its start is logged anyway: ask with it
            listened = events.publish_run_started(thread.pk, agui.run_started(thread.pk, run.pk))
        elif listened := listeners.thread_stream_listened(thread.pk):
            events.publish_thread_event(thread.pk, agui.run_started(thread.pk, run.pk))
        _release_connection()
        ended = engine.call(_stream_run(graph, config, run, hold, listened))
        if ended is _CANCELLED:
            log.info("run %s stopped: cancelled or taken over", run.pk)
            return "cancelled", 0.0
        paused, values = ended
        interrupts = [(i.id, jsonable(i.value), _schema_json(i.response_schema)) for i in paused]
        values = jsonable(values)
        result = None if interrupts else values
        # Before run_finish: once the thread shows the pause or the end, its files are there.
        artifacts.run_outputs_record(run_id=run.pk, values=values)
        finished = pauses_record.run_finish(
            run_id=run.pk,
            worker=worker,
            interrupts=interrupts,
            result=result,
            values=values,
            leased=run,
        )
        if finished is None:
            return "cancelled", 0.0
        if listened or run.stream_modes or listeners.thread_stream_listened(thread.pk):
            ended = agui.run_finished(
                thread.pk,
                run.pk,
                interrupts=interrupts,
                result=result,
                rows=finished.interrupt_rows,
            )
            events.publish_thread_event(thread.pk, ended)
        log.info(
            "run %s %s in %.1f ms", run.pk, finished.status, (time.monotonic() - started) * 1000
        )
        return finished.status, 0.0
    except Exception as exc:
        if is_transient(exc):
            # An infrastructure fault, not the graph's: back to the queue, no attempt spent.
            log.warning("run %s met a transient fault (%s); it will be retried", run.pk, exc)
            connection.close()
            with contextlib.suppress(Exception):
                lease.run_release(run_id=run.pk, worker=worker)
            return "retry", TRANSIENT_RETRY_SECONDS
        log.exception("run %s failed", run.pk)
        lease.run_fail(run_id=run.pk, worker=worker, error="".join(traceback.format_exception(exc)))
        events.publish_thread_event(thread.pk, agui.run_error(str(exc)))
        return "error", 0.0
    finally:
        leases.drop(hold)
