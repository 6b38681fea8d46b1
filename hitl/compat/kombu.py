"""kombu's Redis transport: its QoS kept from killing a worker whose broker connection
went away, one synchronous Redis client per channel (reuse_sync_clients), and its
unacked bookkeeping in one script call each (scripted_unacked).

After a lost broker connection Celery 5.7 / kombu 5.7 still ack (and restore) through
the old channel, whose transport it already dropped; the AttributeError kills the
worker ("Unrecoverable error"). Such an ack has nothing to reach: the message lives in
the old connection's unacked set, comes back after the visibility timeout and is then
skipped because its run is finished. So only the local bookkeeping is done, and the
reaper covers anything left behind. Written against kombu 5.7 (tests/compat pins it).
"""

from __future__ import annotations

import logging
from time import time
from typing import Any

log = logging.getLogger(__name__)

VERSION = "5.7"


def _transport_gone(qos: Any) -> bool:
    transport = getattr(qos.channel, "connection", None)
    return transport is None or getattr(transport, "client", None) is None


def guard_stale_channels() -> None:
    """Patch kombu's Redis QoS once: acks on a dropped transport become local only."""
    from kombu.transport import redis as kombu_redis
    from kombu.transport import virtual

    qos = kombu_redis.QoS
    if getattr(qos, "_hitl_guarded", False):
        return

    def ack(self, delivery_tag):
        if _transport_gone(self):
            log.warning("broker connection gone: ack of %s left to the reaper", delivery_tag)
            return virtual.QoS.ack(self, delivery_tag)
        return original_ack(self, delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if _transport_gone(self):
            log.warning("broker connection gone: reject of %s left to the reaper", delivery_tag)
            return virtual.QoS.ack(self, delivery_tag)
        return original_reject(self, delivery_tag, requeue=requeue)

    def restore_unacked_once(self, stderr=None):
        if _transport_gone(self):
            log.warning("broker connection gone: unacked messages left to the reaper")
            return None
        return original_restore(self, stderr)

    original_ack, original_reject = qos.ack, qos.reject
    original_restore = qos.restore_unacked_once
    qos.ack, qos.reject, qos.restore_unacked_once = ack, reject, restore_unacked_once
    qos._hitl_guarded = True


def reuse_sync_clients() -> None:
    """Patch kombu's Redis channel once: one synchronous client per channel and pool.

    kombu 5.7 builds a new redis-py client for every synchronous command it sends (each
    publish, ack and unacked-set entry), and a redis-py 8 client copies its ~200
    response callbacks when made (~250 µs, more than the command's round trip). A
    client is thread-safe and takes a pooled connection per command, so one per channel
    serves them all; a channel that replaced its pool (a reconnect) gets a new one.
    """
    from kombu.transport import redis as kombu_redis

    channel = kombu_redis.Channel
    if getattr(channel, "_hitl_reuses_clients", False):
        return
    original = channel._create_client

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return original(self, asynchronous=True)
        pool = self.pool
        client = self.__dict__.get("_hitl_sync_client")
        if client is None or client.connection_pool is not pool:
            client = self.__dict__["_hitl_sync_client"] = original(self, asynchronous=False)
        return client

    channel._create_client = _create_client
    channel._hitl_reuses_clients = True


# Both keys in one atomic call, as kombu's MULTI/EXEC pipelines write them. kombu's
# prefixed client prefixes only the first key of an EVALSHA; the second is given whole.
_UNACKED_ADD = """
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
"""
_UNACKED_REMOVE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
"""


class _ScriptedRemoval:
    """What kombu's `_remove_from_indices` returns outside a transaction: a pending
    removal that its caller (ack, reject) `execute()`s."""

    __slots__ = ("qos", "tag")

    def __init__(self, qos: Any, tag: str) -> None:
        self.qos, self.tag = qos, tag

    def execute(self) -> None:
        script = _script(self.qos, "_hitl_unacked_remove", _UNACKED_REMOVE)
        script(keys=_unacked_keys(self.qos), args=[self.tag])


def _unacked_keys(qos: Any) -> list[str]:
    """The index and the hash, as the script's KEYS: the hash's with its prefix."""
    return [qos.unacked_index_key, (qos.channel.global_keyprefix or "") + qos.unacked_key]


def _script(qos: Any, name: str, source: str) -> Any:
    """The channel's registered script `name` (re-registered when its client changed)."""
    channel = qos.channel
    client = channel._create_client()
    scripts = channel.__dict__.setdefault("_hitl_scripts", {})
    script = scripts.get(name)
    if script is None or script.registered_client is not client:
        script = scripts[name] = client.register_script(source)
    return script


def scripted_unacked() -> None:
    """Patch kombu's Redis QoS once: a delivery's unacked entry is written and removed
    by one script call each instead of a MULTI/EXEC pipeline of four commands.

    With late ack every run task is appended on delivery and removed on ack: 16 Redis
    commands per approval cycle become 4, and each task costs about 58 µs less CPU (a
    loop of 2,000 deliveries; docs/benchmarks.md). The entries are the same (the
    sorted-set score, the hash's JSON), written as atomically, so kombu's restore of
    unacked messages reads them unchanged. A removal inside kombu's own restore
    transaction keeps kombu's pipeline.
    """
    from kombu.transport import redis as kombu_redis
    from kombu.transport import virtual
    from kombu.utils.json import dumps

    qos = kombu_redis.QoS
    if getattr(qos, "_hitl_scripted", False):
        return
    original_remove = qos._remove_from_indices

    def append(self, message, delivery_tag):
        delivery = message.delivery_info
        entry = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        script = _script(self, "_hitl_unacked_add", _UNACKED_ADD)
        script(keys=_unacked_keys(self), args=[time(), delivery_tag, entry])
        virtual.QoS.append(self, message, delivery_tag)

    def _remove_from_indices(self, delivery_tag, pipe=None):
        if pipe is not None:
            return original_remove(self, delivery_tag, pipe)
        return _ScriptedRemoval(self, delivery_tag)

    qos.append, qos._remove_from_indices = append, _remove_from_indices
    qos._hitl_scripted = True
