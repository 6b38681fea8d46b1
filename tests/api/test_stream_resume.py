"""SSE streams survive a web restart: langgraph_sdk reconnects to the Location with its
Last-Event-ID, and gets every event exactly once (real daphne, killed and restarted)."""

from __future__ import annotations

import socket

import pytest

from hitl.core.models import Run
from tests.api.client_graphs import TICKS
from tests.api.conftest import StreamsRead, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import free_port, service_env, spawn, wait_for, web_command

pytestmark = pytest.mark.postgres


def _daphne(database_url: str, port: int, log):
    proc = spawn(
        web_command(port),
        service_env(database_url, **CLIENT_ENV),
        log,
    )

    def up() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(up, 30, 0.05, "daphne to listen")
    return proc


def test_sdk_streams_resume_across_a_daphne_restart_missing_nothing(
    stack16,  # noqa: F811
    reviewer,
    test_database_url,
    tmp_path,
):
    from langgraph_sdk import get_sync_client

    port = free_port()
    web = _daphne(test_database_url, port, tmp_path / "web-1.log")
    sdk = get_sync_client(url=f"http://127.0.0.1:{port}/langgraph", api_key=token_for(reviewer))
    first, second = sdk.threads.create(), sdk.threads.create()
    modes = ["custom", "values", "debug"]  # debug: a mode the worker streams on request
    streams = StreamsRead()
    parts, errors, consume, ticks = streams.parts, streams.errors, streams.consume, streams.ticks

    tick_args = {"input": {"pause": 0.5}, "stream_mode": modes}
    threads = [
        consume(
            "runs.stream A", lambda: sdk.runs.stream(first["thread_id"], "ticker", **tick_args)
        ),
        consume(
            "runs.stream B", lambda: sdk.runs.stream(second["thread_id"], "ticker", **tick_args)
        ),
    ]
    try:
        wait_for(lambda: ticks("runs.stream B"), 60, 0.05, "the second run to tick")
        run_id = parts["runs.stream B"][0].data["run_id"]
        threads += [
            consume(
                "runs.join_stream",
                lambda: sdk.runs.join_stream(second["thread_id"], run_id, stream_mode=modes),
            ),
            consume(
                "threads.join_stream",
                lambda: sdk.threads.join_stream(second["thread_id"], stream_mode=modes),
            ),
        ]
        wait_for(
            lambda: all(len(ticks(name)) >= 2 for name in parts),
            60,
            0.05,
            "every stream to tick",
        )
        web.stop()  # the web process goes away mid-run ...
        web = _daphne(test_database_url, port, tmp_path / "web-2.log")  # ... and comes back
        for t in threads:
            t.join(90)
        assert not errors, errors
        for name, got in parts.items():
            seen = ticks(name)
            # From where the stream began to the end: no gap, no repeat across the restart.
            start = 0 if name.startswith("runs.stream") else seen[0]
            assert seen == list(range(start, TICKS)), (name, seen)
            assert [p.event for p in got].count("metadata") == 1, name
            values = [p.data for p in got if p.event == "values"]
            assert values[-1]["ticks"] == TICKS, name
            ids = [p.id for p in got if p.event != "metadata"]
            assert all(ids) and len(set(ids)) == len(ids), name
            debug = [p.data["type"] for p in got if p.event == "debug"]
            whole = ["checkpoint", "checkpoint", "task", "task_result", "checkpoint"]
            if name.startswith("runs.stream"):
                assert debug == whole, (name, debug)
            else:  # joined mid-run: from there on
                assert debug == whole[len(whole) - len(debug) :], (name, debug)
        ours = Run.objects.filter(thread_id__in=[first["thread_id"], second["thread_id"]])
        assert set(ours.values_list("status", flat=True)) == {"success"}
        # The tail came from the restarted server.
        assert "/stream" in (tmp_path / "web-2.log").read_text()
    finally:
        web.stop()
        sdk.close()


@pytest.mark.django_db(transaction=True)
def test_a_reconnect_after_a_pause_gets_the_rest_but_not_the_paused_values_again(
    reviewer, settings
):
    """The parts after a pause's values chunk (tasks, debug) are resumed from; the values
    chunk, which the client had, is not sent again as the stream's end."""
    from asgiref.sync import async_to_sync
    from langgraph.types import Interrupt

    from hitl.api.langgraph.streaming import run_events
    from hitl.core.live import agui, eventlog
    from hitl.core.live.waiting import ThreadSubscription
    from hitl.core.models import Thread

    thread = Thread.objects.create(
        graph=settings.HITL_DEFAULT_GRAPH, requester=reviewer, status=Thread.Status.INTERRUPTED
    )
    run = Run.objects.create(thread=thread, kind=Run.Kind.START, status=Run.Status.INTERRUPTED)
    pause = {"request": "q3", "__interrupt__": [Interrupt(value="ok?", id="i1")]}
    task = {"id": "t1", "name": "ask", "error": None, "result": {}, "interrupts": []}
    debug = {"type": "task_result", "step": 1, "timestamp": "", "payload": task}
    logged = [
        eventlog.append(thread.pk, event)
        for event in [
            agui.run_started(thread.pk, run.pk),
            *agui.events_for_chunk("values", pause),
            *agui.client_chunk_events((), "debug", debug, frozenset({"debug"})),
            *agui.client_chunk_events((), "debug", debug, frozenset({"debug"})),
        ]
    ]

    async def read(last_event_id: str) -> bytes:
        sub = await ThreadSubscription(thread.pk).open()
        parts = run_events(
            sub=sub,
            run=run,
            stream_mode=["values", "debug"],
            timeout=5,
            last_event_id=last_event_id,
        )
        return b"".join([part async for part in parts])

    after_first_debug = async_to_sync(read)(f"{logged[-2]}#0")
    assert after_first_debug.count(b"event: debug") == 1
    assert f"id: {logged[-1]}#0".encode() in after_first_debug
    assert b"__interrupt__" not in after_first_debug
    # Back from before the pause: the paused values come, in their place, once.
    before_pause = async_to_sync(read)(f"{logged[0]}#0")
    assert before_pause.count(b"__interrupt__") == 1
    assert before_pause.index(b"__interrupt__") < before_pause.index(b"event: debug")


@pytest.mark.django_db(transaction=True)
def test_a_stream_that_hears_none_of_its_runs_events_live_reads_them_from_the_log(
    reviewer, settings
):
    """The channel layer may lose a stream's live messages (away, or behind); the run's
    end is then read in the database, and what the log holds of the run still goes out,
    each part once, in its order."""
    from asgiref.sync import async_to_sync

    from hitl.api.langgraph.streaming import run_events
    from hitl.core.live import agui, eventlog
    from hitl.core.live.waiting import ThreadSubscription
    from hitl.core.models import Thread

    thread = Thread.objects.create(
        graph=settings.HITL_DEFAULT_GRAPH, requester=reviewer, status=Thread.Status.DONE
    )
    earlier = Run.objects.create(thread=thread, kind=Run.Kind.START, status=Run.Status.SUCCESS)
    run = Run.objects.create(thread=thread, kind=Run.Kind.START, status=Run.Status.SUCCESS)
    modes = frozenset({"custom", "updates"})

    def batch(mode: str, chunk: dict) -> list[dict]:  # as the worker makes it
        return agui.events_for_chunk(mode, chunk) + agui.client_chunk_events((), mode, chunk, modes)

    def chunks(of: Run) -> list[dict]:
        return [
            agui.run_started(thread.pk, of.pk),
            *[event for n in range(3) for event in batch("custom", {"n": n})],
            *batch("updates", {"act": {"done": True}}),
            agui.run_finished(thread.pk, of.pk, interrupts=[], result={}),
        ]

    # The log has the thread's earlier run too: its parts are not this stream's.
    logged = [eventlog.append(thread.pk, event) for event in chunks(earlier) + chunks(run)]

    async def read() -> bytes:
        sub = await ThreadSubscription(thread.pk).open()
        parts = run_events(
            sub=sub, run=run, stream_mode=["custom", "updates"], timeout=10, whole_run=True
        )
        return b"".join([part async for part in parts])

    body = async_to_sync(read)().decode()
    events = [line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("event: ")]
    assert events == ["metadata", "custom", "custom", "custom", "updates"], body
    ids = [line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("id: ")]
    # The metadata's id: from the log's start (the stream was not told where it began).
    assert ids.pop(0) == "0-0#*", body
    entries = [part.split("#")[0] for part in ids]
    ours = logged[len(logged) // 2 :]
    assert len(ids) == 4 and set(entries) <= set(ours), body
    assert entries == sorted(entries, key=eventlog.order), body
    assert body.index('"n": 0') < body.index('"n": 1') < body.index('"n": 2')


def test_streams_back_after_their_run_ended_get_what_they_missed_once(
    stack16,  # noqa: F811
    reviewer,
    test_database_url,
    tmp_path,
):
    """The web is down until both runs have ended: every stream comes back (Last-Event-ID)
    to a finished run and still gets each part it missed, once, and no second metadata."""
    from langgraph_sdk import get_sync_client

    port = free_port()
    web = _daphne(test_database_url, port, tmp_path / "web-1.log")
    sdk = get_sync_client(url=f"http://127.0.0.1:{port}/langgraph", api_key=token_for(reviewer))
    first, second = sdk.threads.create(), sdk.threads.create()
    modes = ["custom", "values"]
    streams = StreamsRead()
    parts, errors, consume, ticks = streams.parts, streams.errors, streams.consume, streams.ticks

    tick_args = {"input": {"pause": 0.15}, "stream_mode": modes}
    threads = [
        consume(
            "runs.stream A", lambda: sdk.runs.stream(first["thread_id"], "ticker", **tick_args)
        ),
        consume(
            "runs.stream B", lambda: sdk.runs.stream(second["thread_id"], "ticker", **tick_args)
        ),
    ]
    try:
        wait_for(lambda: ticks("runs.stream B"), 60, 0.02, "the second run to tick")
        run_id = parts["runs.stream B"][0].data["run_id"]
        threads += [
            consume(
                "runs.join_stream",
                lambda: sdk.runs.join_stream(second["thread_id"], run_id, stream_mode=modes),
            ),
            consume(
                "threads.join_stream",
                lambda: sdk.threads.join_stream(second["thread_id"], stream_mode=modes),
            ),
        ]
        wait_for(lambda: all(ticks(name) for name in parts), 60, 0.02, "every stream to tick")
        web.stop()
        ours = Run.objects.filter(thread_id__in=[first["thread_id"], second["thread_id"]])
        wait_for(
            lambda: set(ours.values_list("status", flat=True)) == {"success"},
            60,
            0.05,
            "both runs to end while the web is down",
        )
        web = _daphne(test_database_url, port, tmp_path / "web-2.log")
        for t in threads:
            t.join(90)
        assert not errors, errors
        for name, got in parts.items():
            seen = ticks(name)
            start = 0 if name.startswith("runs.stream") else seen[0]
            assert seen == list(range(start, TICKS)), (name, seen)
            assert [p.event for p in got].count("metadata") == 1, name
            assert [p.data for p in got if p.event == "values"][-1]["ticks"] == TICKS, name
    finally:
        web.stop()
        sdk.close()


@pytest.mark.django_db(transaction=True)
def test_a_client_back_with_the_metadata_id_gets_the_parts_after_where_its_stream_began(
    reviewer, settings
):
    """The metadata part's id names the log's last entry before the stream began: a join
    back with it gets what followed its join (not the run's earlier parts), and a stream
    of the whole run (counted from the log's start) gets the run from its start, not the
    thread's earlier run; neither gets metadata again."""
    from asgiref.sync import async_to_sync

    from hitl.api.langgraph.streaming import run_events
    from hitl.core.live import agui, eventlog
    from hitl.core.live.waiting import ThreadSubscription
    from hitl.core.models import Thread

    thread = Thread.objects.create(
        graph=settings.HITL_DEFAULT_GRAPH, requester=reviewer, status=Thread.Status.DONE
    )
    earlier = Run.objects.create(thread=thread, kind=Run.Kind.START, status=Run.Status.SUCCESS)
    run = Run.objects.create(thread=thread, kind=Run.Kind.START, status=Run.Status.SUCCESS)
    modes = frozenset({"custom"})

    def ticks(of: Run, numbers: range) -> list[dict]:  # as the worker makes them
        chunks = [{"n": n, "run": str(of.pk)} for n in numbers]
        return [
            event
            for chunk in chunks
            for event in agui.events_for_chunk("custom", chunk)
            + agui.client_chunk_events((), "custom", chunk, modes)
        ]

    def log(events: list[dict]) -> list[str]:
        return [eventlog.append(thread.pk, event) for event in events]

    log([agui.run_started(thread.pk, earlier.pk), *ticks(earlier, range(2))])
    log([agui.run_finished(thread.pk, earlier.pk, interrupts=[], result={})])
    (joined,) = log([agui.run_started(thread.pk, run.pk), *ticks(run, range(2))])[-1:]
    log([*ticks(run, range(2, 4)), agui.run_finished(thread.pk, run.pk, interrupts=[], result={})])

    def read(last_event_id: str) -> list[str]:
        async def body() -> bytes:
            sub = await ThreadSubscription(thread.pk).open()
            parts = run_events(
                sub=sub, run=run, stream_mode=["custom"], timeout=5, last_event_id=last_event_id
            )
            return b"".join([part async for part in parts])

        text = async_to_sync(body)().decode()
        return [line for line in text.splitlines() if line.startswith(("event: ", "data: "))]

    after_join = read(f"{joined}#*")
    assert "event: metadata" not in after_join
    assert [line for line in after_join if line.startswith("data: ")] == [
        f'data: {{"n": {n}, "run": "{run.pk}"}}' for n in (2, 3)
    ]
    whole_run = read("0-0#*")
    assert "event: metadata" not in whole_run
    assert [line for line in whole_run if line.startswith("data: ")] == [
        f'data: {{"n": {n}, "run": "{run.pk}"}}' for n in range(4)
    ]
