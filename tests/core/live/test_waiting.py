"""Waiting on threads over the real Redis channel layer."""

import asyncio
import contextlib
import uuid

import pytest

from hitl.core.live import eventlog, events, listeners
from hitl.core.live.publisher import _group_send_all, publisher
from hitl.core.live.waiting import ThreadSubscription

pytestmark = pytest.mark.postgres


async def _drain(sub: ThreadSubscription, seconds: float) -> list[dict]:
    got = []
    while (message := await sub.get(seconds)) is not None:
        got.append(message)
    return got


def test_status_waiters_skip_streamed_events_and_get_each_change_once():
    from channels.layers import get_channel_layer

    thread_id = uuid.uuid4()

    async def scenario():
        layer = get_channel_layer()
        async with (
            ThreadSubscription(thread_id) as full,
            ThreadSubscription(thread_id, status_only=True) as status,
        ):
            event = {"type": "thread.event", "thread_id": str(thread_id), "event": {"type": "STEP"}}
            await layer.group_send(listeners.thread_group(thread_id), event)
            change = {"type": "thread.changed", "thread_id": str(thread_id), "status": "done"}
            change["eid"] = uuid.uuid4().hex
            # Published to both groups, as events.publish_thread_changed does.
            await layer.group_send(listeners.thread_group(thread_id), change)
            # The status group's copy is broadcast: the one way there (groups_send).
            await _group_send_all(layer, [((listeners.thread_status_group(thread_id),), change)])
            return await _drain(full, 0.5), await _drain(status, 0.2)

    full_got, status_got = asyncio.run(scenario())
    assert [m["type"] for m in full_got] == ["thread.event", "thread.changed"]
    assert [m["type"] for m in status_got] == ["thread.changed"]


def test_a_wait_outlives_its_dropped_database_connection(transactional_db, requester, monkeypatch):
    """Once a run exists, a dropped session must not end the wait in an error."""
    import threading

    import psycopg
    from asgiref.sync import sync_to_async
    from django.db import connection

    from agents import pg_pool
    from hitl.core.db import retry
    from hitl.core.live import waiting
    from hitl.core.live.waiting import wait_for_run
    from hitl.core.models import Run, Thread
    from tests.conftest import _test_database_url, end_sessions, wait_for

    thread = Thread.objects.create(graph="approval", requester=requester, status="busy")
    run = Run.objects.create(thread=thread, kind="start", status="running")
    url = _test_database_url()
    # The waiter's read takes a pooled session without a check, as one handed back a
    # moment ago (marked so below), however slow the machine and whatever fault an
    # earlier test noted.
    monkeypatch.setattr(pg_pool, "CHECK_AFTER_IDLE_SECONDS", 60.0)
    monkeypatch.setattr(retry, "_suspect_until", 0.0)

    def finish() -> None:
        # As a worker does: on a session of its own, which the fault did not touch.
        with psycopg.connect(url, autocommit=True) as worker:
            worker.execute(
                f"UPDATE {Run._meta.db_table} SET status = 'success' WHERE id = %s", (run.pk,)
            )

    # The run ends once the waiter has met the dropped session, while it waits on.
    finisher = threading.Thread(target=finish)
    met: list[BaseException] = []
    read = waiting._fetch_run

    async def reading(run_id):
        try:
            return await read(run_id)
        except Exception as exc:
            if not met:
                finisher.start()
            met.append(exc)
            raise

    monkeypatch.setattr(waiting, "_fetch_run", reading)

    def read_run() -> int:
        Run.objects.get(pk=run.pk)
        return connection.connection.info.backend_pid

    async def scenario():
        session = await waiting.released(read_run)()
        # The read gave its session back to the pool: the waiter holds none while it waits.
        assert await sync_to_async(lambda: connection.connection)() is None

        # The pool may take the session back on its own worker thread: wait until it has.
        def idle_with_the_reads():
            idle = list(connection.pool._pool)
            return idle if session in [c.info.backend_pid for c in idle] else []

        idle = wait_for(idle_with_the_reads, 10, what="the read's session back in the pool")
        pids = []
        for conn in idle:
            pg_pool.mark_returned(conn)  # handed back a moment ago: used without a check
            pids.append(conn.info.backend_pid)
        end_sessions(url, pids)  # every pooled session dies
        return await wait_for_run(run.pk, 15)

    try:
        finished = asyncio.run(scenario())
    finally:
        if met:
            finisher.join(timeout=30)
    assert met, "the wait never met the dropped session"
    assert finished is not None and finished.status == "success"


def test_workers_see_whether_anyone_listens_to_a_threads_stream():
    # Streamed events are built and sent only while this says yes.
    thread_id = uuid.uuid4()

    async def scenario():
        seen = [await asyncio.to_thread(listeners.thread_stream_listened, thread_id)]
        async with ThreadSubscription(thread_id, status_only=True):
            seen.append(await asyncio.to_thread(listeners.thread_stream_listened, thread_id))
        async with ThreadSubscription(thread_id):
            seen.append(await asyncio.to_thread(listeners.thread_stream_listened, thread_id))
        seen.append(await asyncio.to_thread(listeners.thread_stream_listened, thread_id))
        return seen

    # Nobody; a status waiter (needs no stream); a stream listener; gone again.
    assert asyncio.run(scenario()) == [False, False, True, False]
    # A resumable stream whose client is away (a web restart) still counts.
    eventlog.mark_resumable(thread_id, uuid.uuid4(), ["values"])
    assert listeners.thread_stream_listened(thread_id) is True


def test_a_message_for_several_groups_reaches_each_listening_group_once():
    from channels.layers import get_channel_layer

    async def scenario():
        layer = get_channel_layer()
        first, second = await layer.new_channel(), await layer.new_channel()
        tag = uuid.uuid4().hex
        listened_a, empty, listened_b = (f"test.{tag}.{name}" for name in ("a", "empty", "b"))
        await layer.group_add(listened_a, first)
        await layer.group_add(listened_b, first)
        await layer.group_add(listened_b, second)
        try:
            message = {"type": "thread.changed", "thread_id": tag, "status": "done"}
            await _group_send_all(layer, [((listened_a, empty, listened_b), message)])

            async def drain(channel):
                # A marker sent after the message ends the drain (no receive is cancelled).
                await layer.send(channel, {"type": "test.end"})
                got = []
                while (message := await layer.receive(channel))["type"] != "test.end":
                    got.append(message)
                return got

            return await drain(first), await drain(second)
        finally:
            for group, channel in ((listened_a, first), (listened_b, first), (listened_b, second)):
                await layer.group_discard(group, channel)

    to_first, to_second = asyncio.run(scenario())
    # One copy per group a channel is in, none for the empty group.
    assert [m["status"] for m in to_first] == ["done", "done"]
    assert [m["status"] for m in to_second] == ["done"]


def test_a_page_about_to_open_counts_as_listening(settings):
    # The start form marks its new thread before the run is sent (review/views.py).
    with_redis, without_redis = uuid.uuid4(), uuid.uuid4()
    listeners.expect_listener(with_redis)
    assert listeners.thread_stream_listened(with_redis) is True
    settings.REDIS_URL = ""  # the embedded server: the mark stays in this process
    listeners.expect_listener(without_redis)
    assert listeners.thread_stream_listened(without_redis) is True
    assert str(with_redis) not in listeners._expected  # that one went to Redis


def test_a_thread_nobody_expects_is_not_listened():
    assert listeners.thread_stream_listened(uuid.uuid4()) is False


def test_the_servers_loop_keeps_one_hub_for_every_waiter():
    from hitl.core.live import waiting

    async def scenario():
        loop = asyncio.get_running_loop()
        publisher.bind_loop(loop)  # as hitl.asgi does for the server's loop
        try:
            async with ThreadSubscription(uuid.uuid4(), status_only=True):
                first = waiting._hubs.get(loop)
            async with ThreadSubscription(uuid.uuid4(), status_only=True):
                second = waiting._hubs.get(loop)
            kept = first is second and not first.stopping and not first.task.done()
            await first.layer.send(first.channel, {"type": first.STOP})  # end it here
            first.broadcast_task.cancel()
            await asyncio.wait([first.task, first.broadcast_task], timeout=5)
            return kept
        finally:
            publisher.bind_loop(None)

    assert asyncio.run(scenario()) is True


def test_another_loops_hub_stops_with_its_last_waiter():
    from hitl.core.live import waiting

    async def scenario():
        async with ThreadSubscription(uuid.uuid4(), status_only=True):
            hub = waiting._hubs.get(asyncio.get_running_loop())
        return hub.stopping and hub.task.done() and hub.broadcast_task.done()

    assert asyncio.run(scenario()) is True


def test_a_runs_start_wakes_no_status_waiter_but_reaches_the_thread_group():
    # Status waiters wait for an end; a start only reaches those listening to the thread.
    thread_id = uuid.uuid4()

    async def scenario():
        async with (
            ThreadSubscription(thread_id) as full,
            ThreadSubscription(thread_id, status_only=True) as status,
        ):
            for change in ({"status": "busy"}, {"status": "busy", "run_ended": True}, {}):
                events.publish_thread_changed(
                    thread_id=thread_id,
                    status=change.get("status", "interrupted"),
                    requester_id=None,
                    run_ended=change.get("run_ended", False),
                )
            await asyncio.to_thread(publisher.flush)
            return await _drain(full, 0.5), await _drain(status, 0.2)

    full_got, status_got = asyncio.run(scenario())
    assert [(m["status"], m.get("run_ended", False)) for m in full_got] == [
        ("busy", False),
        ("busy", True),
        ("interrupted", False),
    ]
    assert [(m["status"], m.get("run_ended", False)) for m in status_got] == [
        ("busy", True),
        ("interrupted", False),
    ]


def test_waiting_for_a_thread_to_become_busy_hears_its_runs_start(
    transactional_db, requester, monkeypatch
):
    import threading

    from hitl.core.live import waiting
    from hitl.core.live.waiting import thread_wait_for_status
    from hitl.core.models import Thread

    # A waiter that did not hear the start would see it only at its next re-read or
    # at its timeout: both far off here, so a busy machine cannot blur the two.
    monkeypatch.setattr(waiting, "RECHECK_SECONDS", 60.0)

    thread = Thread.objects.create(graph="approval", requester=requester, status="idle")

    def start() -> None:
        Thread.objects.filter(pk=thread.pk).update(status="busy")
        events.publish_thread_changed(thread_id=thread.pk, status="busy", requester_id=None)

    async def scenario():
        threading.Timer(0.5, start).start()
        began = asyncio.get_running_loop().time()
        status = await thread_wait_for_status(thread.pk, ["busy"], 40)
        return status, asyncio.get_running_loop().time() - began

    status, waited = asyncio.run(scenario())
    # Heard when it came, not at the waiter's re-read (60 s) or its timeout (40 s).
    assert status == "busy" and waited < 20


def test_the_server_hub_stays_in_a_group_a_moment_after_its_last_waiter(monkeypatch):
    """On the server's loop, a wait on a thread right after another (a stream joined
    right after the last) finds the hub still in the group: no join, nothing missed; the
    hub leaves once nobody came back for LINGER_SECONDS, and the next waiter joins anew."""
    from channels.layers import get_channel_layer

    from hitl.core.live import waiting

    monkeypatch.setattr(waiting, "LINGER_SECONDS", 0.4)
    thread_id = uuid.uuid4()
    group = listeners.thread_group(thread_id)

    async def scenario():
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(type(publisher), "server_loop", property(lambda _: loop))
        layer = get_channel_layer()
        redis = layer.connection(0)
        key = layer._group_key(group)
        change = {"type": "thread.changed", "thread_id": str(thread_id), "status": "busy"}
        async with ThreadSubscription(thread_id):
            hub = waiting._hubs[loop]
            joined = await redis.zscore(key, hub.channel)
        assert await redis.zscore(key, hub.channel) == joined  # still in it
        async with ThreadSubscription(thread_id) as again:
            await layer.group_send(group, change)
            heard = await _drain(again, 0.3)
            rejoined = await redis.zscore(key, hub.channel)
        await asyncio.sleep(0.8)
        left = await redis.zscore(key, hub.channel)
        async with ThreadSubscription(thread_id) as later:
            await layer.group_send(group, change)
            heard_later = await _drain(later, 0.3)
            joined_later = await redis.zscore(key, hub.channel)
        await asyncio.sleep(0.8)
        hub.task.cancel()
        hub.broadcast_task.cancel()
        await asyncio.wait([hub.task, hub.broadcast_task])
        return joined, heard, rejoined, left, heard_later, joined_later

    joined, heard, rejoined, left, heard_later, joined_later = asyncio.run(scenario())
    assert joined is not None and rejoined == joined  # the second waiter did not join
    assert [m["status"] for m in heard] == ["busy"]
    assert left is None  # gone once nobody came back
    assert [m["status"] for m in heard_later] == ["busy"]
    assert joined_later is not None and joined_later > joined


@contextlib.asynccontextmanager
async def _status_waiter(thread_id):
    """A status waiter on this loop's hub; yields (the layer, the hub, the waiter)."""
    from channels.layers import get_channel_layer

    from hitl.core.live import waiting

    async with ThreadSubscription(thread_id, status_only=True) as status:
        yield get_channel_layer(), waiting._hubs[asyncio.get_running_loop()], status


def test_a_status_waiter_joins_no_group_and_hears_the_run_end_broadcast():
    """On one Redis, a run's end reaches status waiters on the layer's pub/sub channel,
    with what the waiter answers from: no group joined or left per wait."""
    from hitl.core.live import waiting

    thread_id, run_id = uuid.uuid4(), uuid.uuid4()
    end = events.run_end_summary(run_id=run_id, status="success", values={"n": 1}, interrupts=[])

    async def scenario():
        async with _status_waiter(thread_id) as (layer, hub, status):
            key = layer._group_key(listeners.thread_status_group(thread_id))
            members = await layer.connection(0).zcard(key)
            events.publish_thread_changed(
                thread_id=thread_id, status="idle", requester_id=None, run_end=end
            )
            got = await status.get(20)
            return hub.hearing, status.recheck_seconds, members, got

    hearing, recheck, members, got = asyncio.run(scenario())
    assert hearing is True and recheck == waiting.RECHECK_SECONDS
    assert members == 0
    assert got is not None and got["status"] == "idle" and got["run_end"] == end


def test_the_hub_subscribes_again_when_its_broadcast_connection_drops():
    """Redis dropped the hub's pub/sub connection: the hub subscribes again, and the
    next broadcast reaches the waiter (who polls the database meanwhile)."""
    thread_id = uuid.uuid4()

    async def scenario():
        async with _status_waiter(thread_id) as (layer, hub, status):
            host, port = hub.pubsub.connection._writer.get_extra_info("sockname")[:2]
            await layer.connection(0).execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}")
            # Until it has subscribed again, a broadcast may go unheard: send one each turn.
            deadline = asyncio.get_running_loop().time() + 30
            got = None
            while got is None and asyncio.get_running_loop().time() < deadline:
                events.publish_thread_changed(thread_id=thread_id, status="idle", requester_id=None)
                got = await status.get(0.5)
            return hub.hearing, got

    hearing, got = asyncio.run(scenario())
    assert got is not None and got["status"] == "idle"
    assert hearing is True


def test_a_foreign_message_on_the_broadcast_channel_is_skipped(caplog):
    """What groups_send did not publish is not for the hub: it is skipped and logged,
    and the hub goes on hearing on the same subscription."""
    from hitl.compat import channels_redis

    thread_id = uuid.uuid4()

    async def scenario():
        async with _status_waiter(thread_id) as (layer, hub, status):
            before = hub.pubsub
            channel = channels_redis.broadcast_channel(layer)
            await layer.connection(0).publish(channel, b"\x00not msgpack\xff")
            events.publish_thread_changed(thread_id=thread_id, status="idle", requester_id=None)
            got = await status.get(20)
            return before, hub.pubsub, got

    before, after, got = asyncio.run(scenario())
    assert got is not None and got["status"] == "idle"
    assert after is before
    assert "not the layer's" in caplog.text


def test_a_runs_queued_events_are_read_even_when_its_end_is_read_first(transactional_db, requester):
    """A busy server may read a run's end in the database (after the "busy" change)
    before it reads the RUN_STARTED and events already queued for it: they still reach
    the stream, and the next run's events do not."""
    from hitl.core.live.run_events import run_events_of
    from hitl.core.models import Run, Thread

    thread = Thread.objects.create(graph="approval", requester=requester, status="idle")
    run = Run.objects.create(thread=thread, status="queued", created_by=requester)
    rid, tid = str(run.pk), str(thread.pk)

    def event(kind: str, run_id: str = rid, **more) -> dict:
        return {
            "type": "thread.event",
            "thread_id": tid,
            "event": {"type": kind, "runId": run_id, **more},
        }

    async def scenario() -> list:
        sub = ThreadSubscription(thread.pk)  # not opened: its queue is filled here
        stream = run_events_of(sub, rid, 30)
        assert await anext(stream) is None  # read the run as queued; nothing came in a second
        await asyncio.to_thread(Run.objects.filter(pk=run.pk).update, status="success")
        for message in (
            {"type": "thread.changed", "thread_id": tid, "status": "busy"},
            event("RUN_STARTED"),
            event("STATE_SNAPSHOT", snapshot={"sent": False}),
            {"type": "thread.changed", "thread_id": tid, "status": "idle", "run_ended": True},
            event("RUN_STARTED", run_id=str(uuid.uuid4())),  # a next run, had ours no end
            event("STATE_SNAPSHOT", snapshot={"next": True}),
        ):
            sub.queue.put_nowait(message)
        return [item async for item in stream]

    got = asyncio.run(scenario())
    assert got == [{"type": "STATE_SNAPSHOT", "runId": rid, "snapshot": {"sent": False}}]


def test_a_hub_passes_over_a_second_copy_of_a_run_end_among_its_last_ids():
    from hitl.core.live.waiting import SEEN_IDS, _Hub

    hub = _Hub(layer=None)
    assert hub._first({"eid": "a"}) is True
    assert hub._first({"eid": "a"}) is False  # the other group's copy
    assert hub._first({}) is True and hub._first({}) is True  # no id: never a copy
    for n in range(SEEN_IDS - 1):
        assert hub._first({"eid": f"later-{n}"}) is True
    assert hub._first({"eid": "a"}) is False  # still among the last SEEN_IDS
    assert hub._first({"eid": "one-more"}) is True
    assert hub._first({"eid": "a"}) is True  # the oldest was forgotten
    assert len(hub.seen) == SEEN_IDS


def test_a_heard_wait_on_a_long_run_reads_the_run_only_when_it_ends(transactional_db, requester):
    """While the layer is heard, a wait relies on it: a run that takes seconds (a model
    call) costs its waiter no re-read of the row before its end is announced."""
    from hitl.core.live.waiting import fetch_run, wait_for_run
    from hitl.core.models import Run, Thread

    thread = Thread.objects.create(graph="approval", requester=requester, status="busy")
    run = Run.objects.create(thread=thread, status="running", created_by=requester)
    reads = []

    async def counted(run_id):
        reads.append(asyncio.get_running_loop().time())
        return await fetch_run(run_id)

    async def end(sub: ThreadSubscription) -> None:
        await asyncio.to_thread(Run.objects.filter(pk=run.pk).update, status="success")
        sub.queue.put_nowait(
            {"type": "thread.changed", "thread_id": str(thread.pk), "status": "idle"}
        )

    async def scenario():
        loop = asyncio.get_running_loop()
        async with ThreadSubscription(thread.pk, status_only=True) as sub:
            assert sub.recheck_seconds > 6  # the layer is heard
            began = loop.time()
            # Six seconds in, longer than the old 5 s re-read, the end is announced.
            ending = []
            loop.call_later(6, lambda: ending.append(loop.create_task(end(sub))))
            got = await wait_for_run(run.pk, 30, subscription=sub, known=run, fetch=counted)
            return got, [t - began for t in reads]

    got, read_at = asyncio.run(scenario())
    assert got.status == "success"
    assert len(read_at) == 1 and read_at[0] >= 6, read_at
