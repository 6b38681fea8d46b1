"""This process's Postgres connection pools, counted: what each holds now, what it may
hold, and the most the process held at once.

Every pool HITL opens registers here: Django's (hitl/postgresql) and the checkpointer's
(agents/checkpoint.py; LangGraph's store uses the same pool). Each pool calls `opened`
for every connection it makes, which keeps the process's peak; /metrics reports the
counts (hitl/core/db/connections.py). The counts are the pools' own (psycopg_pool's
`pool_size`: connections in the pool, lent out, or being opened), so they hold behind
a pooler too, where the server sees only the pooler's sessions.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any

_lock = threading.Lock()
# pool -> (kind, url, pid): a forked child inherits its parent's pools, not their sessions.
_pools: weakref.WeakKeyDictionary[Any, tuple[str, str, int]] = weakref.WeakKeyDictionary()
_peak = 0


@dataclass(frozen=True)
class Pool:
    kind: str  # "django" or "checkpointer"
    url: str  # the checkpointer's URL ("" for Django's)
    size: int  # connections open now (or being opened)
    max_size: int


def track(pool: Any, kind: str, url: str = "") -> None:
    """Count `pool` as this process's (before it opens)."""
    with _lock:
        _pools[pool] = (kind, url, os.getpid())


def tracked() -> list[Pool]:
    """This process's open pools."""
    pid = os.getpid()
    with _lock:
        entries = [(pool, *info) for pool, info in _pools.items()]
    out = []
    for pool, kind, url, owner in entries:
        if owner != pid or pool.closed:
            continue
        stats = pool.get_stats()
        out.append(Pool(kind, url, stats["pool_size"], stats["pool_max"]))
    return out


def opened(conn: Any = None) -> None:
    """A pool's configure hook: a connection was just opened, note the process's peak."""
    global _peak
    total = sum(pool.size for pool in tracked())
    with _lock:
        _peak = max(_peak, total)


async def aopened(conn: Any = None) -> None:
    """`opened` for an async pool."""
    opened(conn)


def peak() -> int:
    """The most connections this process's pools held at once."""
    opened()
    return _peak
