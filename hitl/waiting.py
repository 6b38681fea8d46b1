"""Wait for a thread to reach a status without polling: listen on its channel group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from channels.layers import get_channel_layer

from hitl import events
from hitl.models import Thread


async def _status(thread_id) -> str | None:
    return await Thread.objects.filter(pk=thread_id).values_list("status", flat=True).afirst()


async def thread_wait_for_status(thread_id, statuses: Iterable[str], timeout: float) -> str | None:
    """Return the thread's status once it is one of `statuses`, or its status at timeout.

    Subscribes before reading the database, so a change between the read and the
    subscription cannot be missed.
    """
    wanted = set(statuses)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = events.thread_group(thread_id)
    await layer.group_add(group, channel)
    try:
        status = await _status(thread_id)
        deadline = time.monotonic() + timeout
        while status is not None and status not in wanted:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                message = await asyncio.wait_for(layer.receive(channel), remaining)
            except TimeoutError:
                break
            if message.get("type") == "thread.changed":
                status = message.get("status", status)
        return status
    finally:
        await layer.group_discard(group, channel)
