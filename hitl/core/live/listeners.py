"""The channel-layer groups live messages go to, and whether anyone listens to them.

A thread's events are built and sent only while someone follows its stream (a thread
page, an SSE or AG-UI stream), or is about to (expect_listener); waiters for a status
alone listen on its status group.
"""

from __future__ import annotations

import time
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from hitl.compat import channels_redis
from hitl.core.live import eventlog
from hitl.core.live import redis as live_redis
from hitl.core.live.publisher import BROADCAST_PREFIX, memory_members, publisher


def thread_group(thread_id: Any) -> str:
    return f"thread.{thread_id}"


def thread_status_group(thread_id: Any) -> str:
    """Only `thread.changed` messages: for waiters that need no streamed events. A
    broadcast group on a single Redis (hitl.core.live.publisher.BROADCAST_PREFIX)."""
    return f"{BROADCAST_PREFIX}{thread_id}"


def inbox_group(group_id: int | None) -> str:
    return f"inbox.{group_id if group_id is not None else 'none'}"


INBOX_ALL = "inbox.all"


def user_group(user_id: int) -> str:
    """A user's own inbox socket(s): changes of the threads they requested."""
    return f"user.{user_id}"


def own_inbox_group(user_id: int) -> str:
    """Every inbox socket of one reviewer: what only they see (the items they set aside)."""
    return f"inbox.user.{user_id}"


async def _groups_have_members(groups: list[str]) -> bool:
    layer = get_channel_layer()
    if layer is None:
        return False
    if isinstance(layer, InMemoryChannelLayer):  # the embedded server: one process
        return any(layer.groups.get(group) for group in groups)
    if not channels_redis.is_redis_layer(layer):
        return True  # a layer whose membership we cannot read (pubsub): assume someone
    since = channels_redis.live_since(layer)
    connection = channels_redis.single_connection(layer)
    if connection is not None:  # every group on one Redis: one round trip for all
        pipe = connection.pipeline(transaction=False)
        for group in groups:
            pipe.zcount(channels_redis.group_key(layer, group), since, "+inf")
        return any(await pipe.execute())
    for group in groups:
        connection = channels_redis.group_connection(layer, group)
        if await connection.zcount(channels_redis.group_key(layer, group), since, "+inf") > 0:
            return True
    return False


def groups_listened(groups: list[str]) -> bool:
    """Whether any of `groups` has a member (a socket or stream); when unsure: yes."""
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):  # read here: no round trip to the loop
        return any(memory_members(layer, group) for group in groups)
    if layer_on_log_redis(layer):
        # The layer's Redis is the event log's: one round trip from this thread, rather
        # than a hop to the publisher's loop and back.
        since = channels_redis.live_since(layer)
        try:
            pipe = live_redis.client().pipeline(transaction=False)
            for group in groups:
                pipe.zcount(channels_redis.group_key(layer, group), since, "+inf")
            return any(pipe.execute())
        except Exception:
            return True
    return publisher.ask(lambda: _groups_have_members(groups), default=True)


# A page about to open a thread (the start form redirects to it) counts as listening for
# this long: the run's events are built from its start, not only from the step after the
# page's socket joins. Without Redis (one process) the mark is kept here.
EXPECTED_LISTENER_SECONDS = 15.0
_expected: dict[str, float] = {}


def expect_listener(thread_id: Any) -> None:
    """Count the thread's stream as listened for a while: a page is about to open it."""
    if not eventlog.expect_listener(thread_id, EXPECTED_LISTENER_SECONDS):
        now = time.monotonic()
        for key in [k for k, until in _expected.items() if until < now]:
            _expected.pop(key, None)
        _expected[str(thread_id)] = now + EXPECTED_LISTENER_SECONDS


def thread_forget(thread_id: Any, run_ids: list[Any]) -> None:
    """Forget a deleted thread's stream: its replayable event log and marks in Redis,
    its runs' stream modes, and this process's mark. Call after the delete commits.

    Channel-layer group memberships are left to expire: they hold no events, and
    sockets re-check who may view the thread (at least every second)."""
    _expected.pop(str(thread_id), None)
    eventlog.forget(thread_id, run_ids)


def layer_on_log_redis(layer: Any) -> bool:
    """Whether the channel layer keeps its groups on the event log's Redis: then one
    round trip can ask about both."""
    return (
        eventlog.enabled()
        and channels_redis.is_redis_layer(layer)
        and channels_redis.layer_address(layer) == settings.REDIS_URL
    )


def thread_stream_listened(thread_id: Any) -> bool:
    """Whether anyone listens to the thread's full event stream (a thread page, an SSE
    or AG-UI stream); waiters for a status alone listen elsewhere. When unsure: yes."""
    group = thread_group(thread_id)
    layer = get_channel_layer()
    if layer_on_log_redis(layer):
        # The layer's Redis is the event log's: ask both in one round trip from this
        # thread, rather than through the publisher's loop and again for the log.
        since = channels_redis.live_since(layer)
        key = channels_redis.group_key(layer, group)
        return eventlog.stream_listened(key, since, thread_id)
    if _expected.get(str(thread_id), 0.0) > time.monotonic():
        return True
    # A resumable stream's client may be reconnecting (a web restart): keep its events.
    return groups_listened([group]) or eventlog.is_resumable(thread_id)
