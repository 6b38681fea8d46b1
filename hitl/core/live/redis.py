"""The one synchronous Redis client of a process: event log, config cache, worker beats.

The channel layer keeps its own async connections (hitl/compat/channels_redis.py reads
them); everything else that talks to Redis from sync code takes this client.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from django.conf import settings

_clients: dict[int, Any] = {}


def enabled() -> bool:
    """Whether this deployment has Redis (the embedded default has none)."""
    return bool(settings.REDIS_URL)


def client() -> Any:
    """This process's client; a forked child makes its own (a socket is not shared)."""
    pid = os.getpid()
    if pid not in _clients:
        _clients.clear()
        _clients[pid] = redis.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=5
        )
    return _clients[pid]
