"""psycopg_pool's private check, reset and configure hooks, set on a pool Django built.

Django builds its psycopg pool with `check=ConnectionPool.check_connection` when
CONN_HEALTH_CHECKS is on and accepts no check of its own in OPTIONS["pool"]. HITL's
backend (hitl/postgresql) swaps in the checkpointer's idle-only check through the
pool's `_check` and `_reset` attributes, and follows Django's `_configure` with a hook
of its own (the connection count, agents/pools.py), before the pool opens. Written
against psycopg_pool 3.3 (tests/compat pins it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

VERSION = "3.3"


def set_check(
    pool: Any,
    check: Callable[..., Any],
    reset: Callable[..., Any],
    opened: Callable[..., Any] | None = None,
) -> bool:
    """Give an unopened pool this check (on checkout) and reset (on return), and call
    `opened` after its own configure on every new connection; True the first time (a
    pool just built)."""
    if pool._check is check:
        return False
    pool._check, pool._reset = check, reset
    if opened is not None:
        configure = pool._configure

        def configured(conn: Any) -> None:
            if configure is not None:
                configure(conn)
            opened(conn)

        pool._configure = configured
    return True
