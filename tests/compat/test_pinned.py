"""Each patch in hitl/compat holds for the version it was written against.

The version checks fail on an upgrade on purpose: read the new release's code for the
internals named here, adjust the patch, then move its VERSION.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from importlib.metadata import version

import pytest
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.connection import Connection as RedisConnection

from hitl.compat import channels_redis, daphne, kombu, psycopg_pool, redis_asyncio


def _series(dist: str) -> str:
    return ".".join(version(dist).split(".")[:2])


@pytest.mark.parametrize(
    "module, dist",
    [
        (channels_redis, "channels_redis"),
        (daphne, "daphne"),
        (psycopg_pool, "psycopg_pool"),
        (kombu, "kombu"),
        (redis_asyncio, "redis"),
    ],
)
def test_each_patch_names_the_installed_release_series(module, dist):
    assert _series(dist) == module.VERSION, (
        f"{dist} {version(dist)} is installed; hitl/compat/{module.__name__.rsplit('.')[-1]}.py "
        f"was written against {module.VERSION}: re-read its internals and update the patch."
    )


def test_channels_redis_keys_and_connections_are_the_layers_own():
    async def scenario() -> None:
        layer = RedisChannelLayer(hosts=["redis://127.0.0.1:6379/15"], prefix="pin")
        assert channels_redis.is_redis_layer(layer)
        assert channels_redis.group_key(layer, "g1") == layer._group_key("g1")
        assert channels_redis.group_key(layer, "g1") != channels_redis.group_key(layer, "g2")
        assert channels_redis.single_connection(layer) is layer.connection(0)
        assert channels_redis.layer_address(layer) == "redis://127.0.0.1:6379/15"
        await layer.close_pools()

    asyncio.run(scenario())


@pytest.mark.postgres
def test_a_pipelined_join_is_a_membership_the_layer_sends_to():
    if not settings.REDIS_URL:
        pytest.skip("needs Redis")

    async def scenario() -> dict:
        layer = RedisChannelLayer(hosts=[settings.REDIS_URL], prefix="pin")
        channel = await layer.new_channel()
        await channels_redis.group_join(layer, "pinned-group", channel)
        await layer.group_send("pinned-group", {"type": "hello"})
        message = await asyncio.wait_for(layer.receive(channel), 10)
        await layer.group_discard("pinned-group", channel)
        await layer.flush()
        return message

    assert asyncio.run(scenario()) == {"type": "hello"}


@pytest.mark.postgres
def test_a_burst_reaches_each_member_in_order_as_the_layers_own_sends_do():
    if not settings.REDIS_URL:
        pytest.skip("needs Redis")

    async def scenario() -> tuple[list, list, list]:
        layer = RedisChannelLayer(hosts=[settings.REDIS_URL], prefix="pin")
        first, second = await layer.new_channel(), await layer.new_channel()
        await channels_redis.group_join(layer, "pin-a", first)
        await channels_redis.group_join(layer, "pin-b", first)
        await channels_redis.group_join(layer, "pin-b", second)
        sends = [((f"pin-{g}",), {"type": "n", "n": n}) for n, g in enumerate("abab")]
        sends.append((("pin-empty", "pin-a"), {"type": "n", "n": 4}))
        assert await channels_redis.groups_send(layer, sends) is True
        # Sent by the layer itself afterwards: it comes after the burst.
        await layer.group_send("pin-b", {"type": "n", "n": 5})
        got_first = [await asyncio.wait_for(layer.receive(first), 10) for _ in range(6)]
        got_second = [await asyncio.wait_for(layer.receive(second), 10) for _ in range(3)]
        nobody = await channels_redis.groups_send(layer, [(("pin-empty",), {"type": "n"})])
        for group, channel in (("pin-a", first), ("pin-b", first), ("pin-b", second)):
            await layer.group_discard(group, channel)
        await layer.flush()
        return got_first, got_second, [nobody]

    got_first, got_second, nobody = asyncio.run(scenario())
    assert [m["n"] for m in got_first] == [0, 1, 2, 3, 4, 5]
    assert [m["n"] for m in got_second] == [1, 3, 5]
    assert nobody == [True]


@pytest.mark.postgres
def test_a_broadcast_is_heard_on_its_own_redis_database_only():
    """Redis's pub/sub channels span its databases: a layer in another database (another
    deployment on the same Redis) does not hear this one's broadcasts."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis")
    from urllib.parse import urlsplit

    url = settings.REDIS_URL
    db = int(urlsplit(url).path.strip("/") or 0)
    other_url = url.rsplit("/", 1)[0] + f"/{(db + 1) % 16}"  # only pub/sub: no key is written

    async def scenario() -> tuple[list, list]:
        here = RedisChannelLayer(hosts=[url], prefix="pin")
        there = RedisChannelLayer(hosts=[other_url], prefix="pin")
        assert channels_redis.broadcast_channel(here) != channels_redis.broadcast_channel(there)
        heard_here = await channels_redis.broadcasts(here)
        heard_there = await channels_redis.broadcasts(there)
        everyone = lambda group: True  # noqa: E731
        await channels_redis.groups_send(here, [(("pin-b",), {"type": "n", "n": 1})], everyone)
        await channels_redis.groups_send(there, [(("pin-b",), {"type": "n", "n": 2})], everyone)
        # Delivered in publish order: were the first heard over there, it would come first.
        got = [await asyncio.wait_for(channels_redis.next_broadcast(here, heard_here), 10)]
        got_there = [await asyncio.wait_for(channels_redis.next_broadcast(there, heard_there), 10)]
        for pubsub in (heard_here, heard_there):
            await pubsub.aclose()
        await here.close_pools()
        await there.close_pools()
        return got, got_there

    got, got_there = asyncio.run(scenario())
    assert [m["n"] for m in got] == [1]
    assert [m["n"] for m in got_there] == [2]


class CancelledAsWritten(RedisConnection):
    """Cancels a task the moment its command's bytes have gone out: a socket closing as
    the layer sends its BZPOPMIN. Python 3.11's wait_for then hands the write back and
    drops the cancellation (CPython gh-86296)."""

    armed: dict[bytes, asyncio.Task] = {}

    async def _send_packed_command(self, command) -> None:
        await super()._send_packed_command(command)
        for name, task in list(self.armed.items()):
            if any(name in part for part in command):
                del self.armed[name]
                asyncio.get_running_loop().call_soon(task.cancel)


def _cancelled_as_written_ping(url: str) -> tuple[bool, str | None]:
    """Whether the PING's task ended cancelled, then what the same client reads next."""

    async def scenario() -> tuple[bool, str | None]:
        pool = ConnectionPool.from_url(url, connection_class=CancelledAsWritten, socket_timeout=5)
        client = Redis(connection_pool=pool)
        await client.set("pin-cancelled-as-written", "after")
        task = asyncio.current_task()
        pinging = asyncio.ensure_future(client.ping())
        CancelledAsWritten.armed[b"PING"] = pinging
        try:
            await pinging
        except asyncio.CancelledError:
            if task.cancelling():  # this test's own task was not the one cancelled
                raise
        after = await client.get("pin-cancelled-as-written")
        await client.delete("pin-cancelled-as-written")
        await pool.disconnect()
        return pinging.cancelled(), after and after.decode()

    return asyncio.run(scenario())


@pytest.mark.postgres
def test_a_redis_command_cancelled_as_its_write_ends_is_cancelled_and_its_reply_unread():
    if not settings.REDIS_URL:
        pytest.skip("needs Redis")
    redis_asyncio.keep_cancellations()
    redis_asyncio.keep_cancellations()  # once: the original is not wrapped twice
    patched = AbstractConnection.send_packed_command
    assert not getattr(patched.__wrapped__, "keeps_cancellations", False)

    cancelled, after = _cancelled_as_written_ping(settings.REDIS_URL)
    # The PING's reply was never read: the next command reads its own.
    assert (cancelled, after) == (True, "after")


@pytest.mark.postgres
def test_without_the_patch_python_3_11_loses_that_cancellation(monkeypatch):
    """The race above is real on this Python: unpatched, the cancelled PING answers."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis")
    redis_asyncio.keep_cancellations()
    original = AbstractConnection.send_packed_command.__wrapped__
    monkeypatch.setattr(AbstractConnection, "send_packed_command", original)
    cancelled, after = _cancelled_as_written_ping(settings.REDIS_URL)
    assert (cancelled, after) == (sys.version_info >= (3, 12), "after")


@pytest.mark.postgres
def test_a_layer_receive_cancelled_as_its_bzpopmin_is_written_ends():
    """A socket that closes as its consumer's receive writes BZPOPMIN: the receive ends
    instead of reading a channel nobody owns every five seconds."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis")
    redis_asyncio.keep_cancellations()

    async def scenario() -> tuple[bool, bool]:
        host = {"address": settings.REDIS_URL, "socket_timeout": 30}
        layer = RedisChannelLayer(
            hosts=[{**host, "connection_class": CancelledAsWritten}], prefix="pin"
        )
        channel = await layer.new_channel()
        receiving = asyncio.ensure_future(layer.receive(channel))
        CancelledAsWritten.armed[b"BZPOPMIN"] = receiving
        # A bound for a failure only: unpatched, the receive never ends.
        await asyncio.wait({receiving}, timeout=60)
        ended, cancelled = receiving.done(), receiving.done() and receiving.cancelled()
        if not ended:
            receiving.cancel()
        await layer.close_pools()
        return ended, cancelled

    assert asyncio.run(scenario()) == (True, True)


def test_daphne_requests_leave_post_bodies_to_django():
    from daphne import http_protocol

    daphne.raw_request_bodies()
    daphne.raw_request_bodies()  # idempotent: one subclass, not a chain
    assert http_protocol.WebRequest.raw_bodies is True
    assert http_protocol.WebRequest.__mro__[1].__name__ == "WebRequest"
    assert not getattr(http_protocol.WebRequest.__mro__[1], "raw_bodies", False)
    params = inspect.signature(http_protocol.WebRequest.__mro__[2].__init__).parameters
    assert "parsePOSTFormSubmission" in params  # Twisted's Request still takes it


def test_daphne_writes_the_only_access_log_line():
    from daphne import http_protocol
    from twisted.web import http

    formatted = []

    def formatter(timestamp, request):
        formatted.append(request)
        return "line"

    class LogFile:
        def __init__(self):
            self.lines = []

        def write(self, line):
            self.lines.append(line)

    # Twisted's factory formats and writes a line per request to its log file ...
    twisted_factory = http.HTTPFactory(logFormatter=formatter)
    twisted_factory._logFile = twisted_file = LogFile()
    twisted_factory.log("request")
    assert formatted == ["request"] and twisted_file.lines == ["line\n"]
    # ... and daphne's, once told, neither formats nor writes one.
    daphne.one_access_log()
    daphne.one_access_log()  # idempotent
    daphne_factory = http_protocol.HTTPFactory(server=None)
    daphne_factory._logFormatter = formatter
    daphne_factory._logFile = daphne_file = LogFile()
    daphne_factory.log("request")
    assert formatted == ["request"] and daphne_file.lines == []
    assert http.HTTPFactory.log is not http_protocol.HTTPFactory.log  # Twisted's own is kept


def test_psycopg_pool_takes_the_check_it_is_given():
    from psycopg_pool import ConnectionPool

    def check(conn):
        return None

    def reset(conn):
        return None

    pool = ConnectionPool("dbname=none", open=False)
    psycopg_pool.set_check(pool, check, reset)
    assert pool._check is check and pool._reset is reset


def test_kombu_channels_reuse_one_sync_client_until_their_pool_changes():
    from kombu import Connection

    kombu.reuse_sync_clients()
    kombu.reuse_sync_clients()  # once: the original is not wrapped twice
    with Connection(settings.REDIS_URL) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.ping() is True
        channel._pool = None  # what kombu does when it drops its pools (a reconnect)
        with channel.conn_or_acquire() as third:
            assert third is not first and third.connection_pool is channel.pool
        assert channel._create_client(asynchronous=True) is not third


def test_kombu_qos_is_guarded_once_and_keeps_its_methods():
    from kombu.transport import redis as kombu_redis

    kombu.guard_stale_channels()
    first = kombu_redis.QoS.ack
    kombu.guard_stale_channels()
    assert kombu_redis.QoS.ack is first
    assert kombu_redis.QoS._hitl_guarded is True
    for name in ("ack", "reject", "restore_unacked_once"):
        assert callable(getattr(kombu_redis.QoS, name))


@pytest.mark.parametrize("prefix", ["", "hitl-test-prefix:"])
def test_kombu_unacked_entries_are_one_script_call_each_and_restore_as_kombus(prefix, monkeypatch):
    import json
    import uuid

    import redis
    from kombu import Connection
    from kombu.transport import redis as kombu_redis

    kombu.scripted_unacked()
    first = kombu_redis.QoS.append
    kombu.scripted_unacked()  # once: the original is not wrapped twice
    assert kombu_redis.QoS.append is first and kombu_redis.QoS._hitl_scripted is True

    store = redis.Redis.from_url(settings.REDIS_URL)
    index, entries = f"{prefix}unacked_index", f"{prefix}unacked"
    name = f"hitl-test-unacked-{uuid.uuid4().hex}"
    options = {"global_keyprefix": prefix} if prefix else {}
    with Connection(settings.REDIS_URL, transport_options=options) as conn:
        queue = conn.SimpleQueue(name)
        try:
            queue.put({"n": 1})
            with monkeypatch.context() as patched:  # no pipeline: kombu's would MULTI/EXEC
                patched.setattr(redis.client.Pipeline, "execute", _no_pipeline)
                message = queue.get(timeout=5)
            tag = message.delivery_tag
            # Written as kombu's pipeline writes it: a score of now, the raw message.
            assert store.zscore(index, tag) is not None
            raw, exchange, routing_key = json.loads(store.hget(entries, tag))
            assert routing_key == name and raw["properties"]["delivery_tag"] == tag

            # kombu's own restore reads the entry back and removes it in its transaction.
            queue.channel.qos.restore_by_tag(tag)
            assert store.zscore(index, tag) is None and store.hget(entries, tag) is None
            again = queue.get(timeout=5)
            assert again.payload == {"n": 1}
            assert store.hget(entries, again.delivery_tag) is not None

            with monkeypatch.context() as patched:  # removed by the script, both keys
                patched.setattr(redis.client.Pipeline, "execute", _no_pipeline)
                again.ack()
            assert store.zscore(index, again.delivery_tag) is None
            assert store.hget(entries, again.delivery_tag) is None
            assert store.llen(f"{prefix}{name}") == 0
        finally:
            queue.close()
            store.delete(f"{prefix}{name}")


def _no_pipeline(self, *args, **kwargs):
    raise AssertionError(f"a Redis pipeline ran: {self.command_stack!r}")
