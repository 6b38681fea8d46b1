"""psycopg_pool's private check and reset hooks, set on a pool Django built.

Django builds its psycopg pool with `check=ConnectionPool.check_connection` when
CONN_HEALTH_CHECKS is on and accepts no check of its own in OPTIONS["pool"]. HITL's
backend (hitl/postgresql) swaps in the checkpointer's idle-only check through the
pool's `_check` and `_reset` attributes, before the pool opens. Written against
psycopg_pool 3.3 (tests/compat pins it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

VERSION = "3.3"


def set_check(pool: Any, check: Callable[..., Any], reset: Callable[..., Any]) -> None:
    """Give an unopened pool this check (on checkout) and reset (on return)."""
    if pool._check is not check:
        pool._check, pool._reset = check, reset
