"""A run's stream events cost one Redis round trip per batch, and are sent live only to a
thread group someone is in; a stream that subscribes later reads them from the log."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels.layers import get_channel_layer

from hitl.core.live import eventlog, events, listeners
from hitl.core.live import redis as live_redis
from hitl.core.live.batches import EventBatches

pytestmark = pytest.mark.postgres  # the Redis deployment: the log and layer on one Redis


@pytest.fixture
def commands(monkeypatch):
    """The commands this process's Redis client sends, by name."""
    client = live_redis.client()
    sent: list[str] = []
    original = client.execute_command

    def counted(*args, **kwargs):
        sent.append(str(args[0]).upper())
        return original(*args, **kwargs)

    monkeypatch.setattr(client, "execute_command", counted)
    return sent


@pytest.fixture
def published(monkeypatch):
    sent: list[tuple[list[str], dict]] = []
    real = events.publish

    def publish(groups, message):
        sent.append((list(groups), message))
        real(groups, message)

    monkeypatch.setattr(events, "publish", publish)
    return sent


def _batch(n: int) -> list[dict]:
    return [{"type": "CUSTOM", "name": "step", "value": i} for i in range(n)]


def test_a_batch_nobody_hears_is_logged_in_one_round_trip_and_not_sent(commands, published):
    assert eventlog.enabled(), "this test needs the Redis deployment"
    thread_id = uuid.uuid4()
    events.publish_thread_events(uuid.uuid4(), _batch(1))  # the script is loaded once
    commands.clear()

    events.publish_thread_events(thread_id, _batch(5))

    assert commands == ["EVALSHA"]
    assert published == []
    logged = eventlog.read_from(thread_id, "0-0")
    assert [event["value"] for _, event in logged] == [0, 1, 2, 3, 4]


def test_a_batch_a_member_hears_is_sent_live_in_order_with_its_log_ids(published):
    layer = get_channel_layer()
    thread_id = uuid.uuid4()

    async def listen() -> list[dict]:
        channel = await layer.new_channel()
        await layer.group_add(listeners.thread_group(thread_id), channel)
        await asyncio.to_thread(events.publish_thread_events, thread_id, _batch(3))
        got = [await asyncio.wait_for(layer.receive(channel), 30) for _ in range(3)]
        await layer.group_discard(listeners.thread_group(thread_id), channel)
        return got

    got = asyncio.run(listen())

    logged = eventlog.read_from(thread_id, "0-0")
    assert [m["event"]["value"] for m in got] == [0, 1, 2]
    assert [m["seq"] for m in got] == [entry for entry, _ in logged]
    assert [groups for groups, _ in published] == [[listeners.thread_group(thread_id)]] * 3


def test_a_runs_batches_reach_a_live_listener_before_the_run_ends():
    layer = get_channel_layer()
    thread_id = uuid.uuid4()

    async def listen() -> tuple[list[dict], list[dict]]:
        channel = await layer.new_channel()
        await layer.group_add(listeners.thread_group(thread_id), channel)
        # The run's start, as the worker logs it before streaming: it finds the listener.
        await asyncio.to_thread(events.publish_thread_events, thread_id, _batch(1))
        started = [await asyncio.wait_for(layer.receive(channel), 30)]
        out = EventBatches(thread_id)
        out.add(_batch(2))
        out.add(_batch(3))
        # Heard while the run still streams: nothing waits for its end.
        live = [await asyncio.wait_for(layer.receive(channel), 30) for _ in range(5)]
        await out.close()
        await layer.group_discard(listeners.thread_group(thread_id), channel)
        return started, live

    started, live = asyncio.run(listen())

    logged = eventlog.read_from(thread_id, "0-0")
    assert [m["event"]["value"] for m in started + live] == [0, 0, 1, 0, 1, 2]
    assert [m["seq"] for m in started + live] == [entry for entry, _ in logged]


def test_a_listener_that_joins_while_events_wait_gets_them_live_in_log_order():
    layer = get_channel_layer()
    thread_id = uuid.uuid4()

    async def scenario() -> list[dict]:
        out = EventBatches(thread_id)  # nobody listens: the events wait for a batch
        out.add(_batch(2))
        channel = await layer.new_channel()
        await layer.group_add(listeners.thread_group(thread_id), channel)
        out.add(_batch(2))
        await out.close()
        got = [await asyncio.wait_for(layer.receive(channel), 30) for _ in range(4)]
        await layer.group_discard(listeners.thread_group(thread_id), channel)
        return got

    got = asyncio.run(scenario())

    logged = eventlog.read_from(thread_id, "0-0")
    assert [event["value"] for _, event in logged] == [0, 1, 0, 1]  # each once, in order
    assert [m["seq"] for m in got] == [entry for entry, _ in logged]
