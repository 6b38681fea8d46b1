"""The Redis clients of a process: event log, config cache, worker beats.

The channel layer keeps its own async connections (hitl/compat/channels_redis.py reads
them); everything else that talks to Redis from sync code takes this process's one
sync client, and code on an event loop (the run engine's) that loop's async client.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import Any

import redis
import redis.asyncio
from django.conf import settings

_clients: dict[int, Any] = {}
_lock = threading.Lock()
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, Any]] = (
    weakref.WeakKeyDictionary()
)


def enabled() -> bool:
    """Whether this deployment has Redis (the embedded default has none)."""
    return bool(settings.REDIS_URL)


def client() -> Any:
    """This process's client; a forked child makes its own (a socket is not shared)."""
    pid = os.getpid()
    client = _clients.get(pid)
    if client is not None:
        return client
    # Threads asking together on a fresh process (a worker's first runs) get one client,
    # not one connection pool each.
    with _lock:
        if pid not in _clients:
            _clients.clear()
            _clients[pid] = redis.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=5
            )
        return _clients[pid]


def aclient() -> Any:
    """The running loop's async client: its connections belong to that loop alone."""
    loop = asyncio.get_running_loop()
    pid = os.getpid()
    found = _async_clients.get(loop)
    if found is None or found[0] != pid:
        found = _async_clients[loop] = (
            pid,
            redis.asyncio.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=5
            ),
        )
    return found[1]
