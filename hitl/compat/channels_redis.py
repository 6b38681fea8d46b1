"""channels_redis internals: which Redis key and connection hold a group.

channels_redis 4.3 has no public read of group membership, and spends two round trips
on a group_add. HITL reads membership (to skip sends nobody hears) and joins groups in
one pipelined round trip through the layer's private `_group_key`, `connection()` and
`consistent_hash()`. Written against channels_redis 4.3 (tests/compat pins it).
"""

from __future__ import annotations

import time
from typing import Any

from channels_redis.core import RedisChannelLayer

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
