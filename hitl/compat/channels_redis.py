"""channels_redis internals: which Redis key and connection hold a group.

channels_redis 4.3 has no public read of group membership, spends two round trips on a
group_add and four on a group_send (one group at a time). HITL reads membership (to
skip sends nobody hears), joins groups in one pipelined round trip and sends to several
groups in two (one when none has a member) through the layer's private `_group_key`,
`connection()`, `consistent_hash()` and `_map_channel_keys_to_connection()` (which
serializes each channel key's message as the layer's own group_send does). Written
against channels_redis 4.3 (tests/compat pins it).

Groups that a caller names as broadcast groups get no members at all: their messages
go out once on the layer's Redis pub/sub channel (`broadcast_channel`), in the same
round trip, and every process that listens there (`broadcasts`) hears all of them.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

from channels_redis.core import RedisChannelLayer

log = logging.getLogger(__name__)

VERSION = "4.3"


def is_redis_layer(layer: Any) -> bool:
    return isinstance(layer, RedisChannelLayer)


def group_key(layer: RedisChannelLayer, group: str) -> str:
    """The sorted set that holds the group's members (channel -> joined at)."""
    return layer._group_key(group)


def group_connection(layer: RedisChannelLayer, group: str) -> Any:
    """The Redis connection of the shard that holds `group`."""
    return layer.connection(layer.consistent_hash(group))


def single_connection(layer: RedisChannelLayer) -> Any | None:
    """The one connection of an unsharded layer (every group lives there), else None."""
    return layer.connection(0) if layer.ring_size == 1 else None


def live_since(layer: RedisChannelLayer) -> int:
    """Members that joined before this unix time have expired."""
    return int(time.time()) - layer.group_expiry


def layer_address(layer: RedisChannelLayer) -> Any:
    """The address of an unsharded layer's Redis."""
    return layer.hosts[0].get("address") if layer.ring_size == 1 else None


async def group_join(layer: RedisChannelLayer, group: str, channel: str) -> None:
    """group_add in one round trip: the member and the set's expiry, pipelined."""
    key = group_key(layer, group)
    pipe = group_connection(layer, group).pipeline(transaction=False)
    pipe.zadd(key, {channel: time.time()})
    pipe.expire(key, layer.group_expiry)
    await pipe.execute()


# Each group's expired members dropped and the live ones listed, as group_send's first
# two round trips do, for every group at once.
# ARGV: cutoff, the broadcast channel, then the broadcast messages, published in order.
_MEMBERS = """
local out = {}
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, ARGV[1])
  out[i] = redis.call('ZRANGE', KEYS[i], 0, -1)
end
for i = 3, #ARGV do
  redis.call('PUBLISH', ARGV[2], ARGV[i])
end
return out
"""
# Its last two: each channel key's expired messages dropped, then the message added
# unless the channel is at capacity. ARGV: cutoff, expiry, then per key its message,
# capacity and score.
_DELIVER = """
local n = #KEYS
local over = 0
for i = 1, n do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, ARGV[1])
  if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[2 + n + i]) then
    redis.call('ZADD', KEYS[i], ARGV[2 + 2 * n + i], ARGV[2 + i])
    redis.call('EXPIRE', KEYS[i], ARGV[2])
  else
    over = over + 1
  end
end
return over
"""
_scripts: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()


def _scripts_of(connection: Any) -> tuple[Any, Any]:
    scripts = _scripts.get(connection)
    if scripts is None:
        scripts = _scripts[connection] = (
            connection.register_script(_MEMBERS),
            connection.register_script(_DELIVER),
        )
    return scripts


async def groups_send(
    layer: RedisChannelLayer,
    sends: list[tuple[tuple[str, ...], dict[str, Any]]],
    broadcast: Callable[[str], bool] = lambda group: False,
) -> bool:
    """For each (groups, message) of `sends` in turn, group_send the message to each of
    its groups, as the layer's own group_send does, in two round trips for them all (one
    when no group has a member). A message to a `broadcast` group is published once on
    the broadcast channel instead, in the first round trip. False (nothing sent) on a
    sharded layer: the caller then sends group by group."""
    connection = single_connection(layer)
    if connection is None:
        return False
    members, deliver = _scripts_of(connection)
    now = time.time()
    groups = list(
        dict.fromkeys(group for targets, _ in sends for group in targets if not broadcast(group))
    )
    published = [
        layer.serialize(message)
        for targets, message in sends
        if any(broadcast(group) for group in targets)
    ]
    listed = await members(
        keys=[group_key(layer, group) for group in groups],
        args=[int(now) - layer.group_expiry, broadcast_channel(layer), *published],
    )
    names = {
        group: [name.decode() for name in found]
        for group, found in zip(groups, listed, strict=True)
        if found
    }
    keys: list[str] = []
    messages: list[bytes] = []
    capacities: list[int] = []
    for targets, message in sends:
        for group in targets:
            if group not in names:  # nobody in it, or a broadcast group
                continue
            _, to_message, to_capacity = layer._map_channel_keys_to_connection(
                names[group], message
            )
            for key, serialized in to_message.items():
                keys.append(key)
                messages.append(serialized)
                capacities.append(to_capacity[key])
    if keys:
        await deliver(
            keys=keys,
            args=[int(now) - int(layer.expiry), layer.expiry, *messages, *capacities]
            + _scores(now, len(keys)),
        )
    return True


_last_score = [0.0]


def _scores(now: float, count: int) -> list[float]:
    """Increasing send times for `count` messages: a channel receives the lowest score
    first, so messages sent together must not share one (the layer's own sends each
    take the time of their own round trip)."""
    first = max(now, _last_score[0] + _SCORE_STEP)
    scores = [first + i * _SCORE_STEP for i in range(count)]
    _last_score[0] = scores[-1]
    return scores


# Well above a double's resolution at today's unix times (about 2.4e-7 s).
_SCORE_STEP = 1e-5


def can_broadcast(layer: Any) -> bool:
    """Whether groups_send publishes broadcast groups' messages on this layer (a Redis
    layer on one Redis: a sharded one sends them to members, group by group)."""
    return is_redis_layer(layer) and layer.ring_size == 1


def broadcast_channel(layer: RedisChannelLayer) -> str:
    """The pub/sub channel on which groups_send publishes broadcast groups' messages.

    Redis's pub/sub channels are the server's, not a database's: the database number is
    part of the name, so layers that share a Redis in different databases (two
    deployments, or the test suite's workers) do not hear each other."""
    db = layer.connection(0).connection_pool.connection_kwargs.get("db") or 0
    return f"{layer.prefix}:broadcast:{db}"


async def broadcasts(layer: RedisChannelLayer) -> Any:
    """A pub/sub connection to the broadcast channel of a layer that can_broadcast,
    returned once Redis has confirmed the subscription (so nothing published after this
    returns is missed)."""
    pubsub = layer.connection(0).pubsub()
    try:
        await pubsub.subscribe(broadcast_channel(layer))
        while (await pubsub.get_message(timeout=None) or {}).get("type") != "subscribe":
            pass
    except BaseException:
        await pubsub.aclose()
        raise
    return pubsub


async def next_broadcast(layer: RedisChannelLayer, pubsub: Any) -> dict[str, Any]:
    """The next message published on the broadcast channel (raises when the connection
    fails: the caller subscribes again)."""
    while True:
        message = await pubsub.get_message(timeout=None)
        if message is None or message["type"] != "message":
            continue
        try:
            decoded = layer.deserialize(message["data"])
        except Exception:  # not one of groups_send's: not for us
            decoded = None
        if isinstance(decoded, dict):
            return decoded
        log.warning("skipped a message on %s that is not the layer's", broadcast_channel(layer))
