"""redis-py's asyncio connections: a cancellation that arrives as a command's write ends
is kept, not lost (keep_cancellations).

With a socket_timeout set (the channel layer's 30 s, the engine's client 5 s), redis-py
8.1 bounds each write with asyncio.wait_for (AbstractConnection.send_packed_command).
On Python 3.11, wait_for returns the result of an inner task that finished in the step
its caller was cancelled in, and the cancellation is gone (CPython gh-86296; 3.12
rebuilt wait_for on asyncio.timeout). A channel layer's receive so cancelled, when its
socket closes, never ends: it reads a channel nobody owns every five seconds for as
long as the process lives, and a test's event loop never closes. It took about one
refused socket in a hundred.

The patch reads the task's cancellation count around the write. A write that returns
with the count risen was cancelled: its reply will never be read, so the connection is
closed (the pool opens a new one) and the CancelledError is raised after all. Written
against redis-py 8.1 (tests/compat pins it).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from redis.asyncio.connection import AbstractConnection

VERSION = "8.1"


def keep_cancellations() -> None:
    """Patch every asyncio connection class once (plain, TLS and Unix socket alike)."""
    send = AbstractConnection.send_packed_command
    if getattr(send, "keeps_cancellations", False):
        return

    @functools.wraps(send)
    async def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        task = asyncio.current_task()
        cancels = task.cancelling() if task is not None else 0
        await send(self, command, check_health)
        if task is not None and task.cancelling() > cancels:
            await self.disconnect(nowait=True)
            raise asyncio.CancelledError

    send_packed_command.keeps_cancellations = True  # type: ignore[attr-defined]
    AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
