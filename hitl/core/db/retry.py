"""Repeat work whose transaction met a transient database fault, within a short deadline.

When the database drops sessions (a restart, a failover, `pg_terminate_backend`) but is
back at once, a request whose work is safe to repeat is repeated here, in the server,
until HITL_DB_RETRY_SECONDS have passed: its client never hears of the fault (and
langgraph_sdk, for one, would not try again). Longer outages still end in Unavailable,
which the APIs answer with 503 + Retry-After.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection

from agents.checkpoint import sync_pools
from hitl.core.errors import Unavailable, is_transient

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

# Pauses between attempts; the last one repeats until the deadline.
BACKOFF = (0.02, 0.05, 0.1, 0.2, 0.4)
# After a fault, every pooled connection handed out this long is checked first: a
# session the server dropped with the one that failed is replaced, not used.
SUSPECT_SECONDS = 3.0
_suspect_until = 0.0


def suspect_connections() -> None:
    """Note a transient fault: the pool checks each connection it hands out for a moment."""
    global _suspect_until
    _suspect_until = time.monotonic() + SUSPECT_SECONDS


def connections_suspect() -> bool:
    return time.monotonic() < _suspect_until


def discard_dead_connections() -> None:
    """After a fault, test every idle connection of this process's pools at once and
    replace the dead ones.

    Left to the pool's own check at checkout, each dead connection is found by the next
    request that takes it, and psycopg_pool then waits before handing out another
    (1 s, 2 s, 4 s...): a repeat could start seconds after the fault, past its deadline,
    and a second drop then ended it in a 503 though the database was back.
    """
    pool = getattr(connection, "pool", None)
    pools = [pool] if pool is not None else []
    for other in [*pools, *sync_pools()]:
        try:
            other.check()
        except Exception as exc:  # a closed pool, or one still opening: the checkout checks
            log.debug("checking pooled connections failed: %s", exc)


def _frames(tb: TracebackType | None):
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def met_while_committing(exc: BaseException) -> bool:
    """True when the fault struck a COMMIT: the transaction may have been committed.

    Repeating such work could do it twice, so it is not repeated; the client hears 503
    and finds out (a wait lists the thread's runs, a decision reads "already answered").
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "may_have_committed", False):  # a statement in autocommit
            return True
        for frame in _frames(current.__traceback__):
            if (
                frame.f_code.co_name == "_commit"
                and "django/db/backends" in frame.f_code.co_filename
            ):
                return True
        current = current.__cause__ or current.__context__
    return False


def retry_transient(func: F) -> F:
    """Run `func` again (after a short backoff) while the database connection fails,
    for at most HITL_DB_RETRY_SECONDS.

    Only for work whose whole effect is one transaction that re-checks its
    preconditions under lock (or a read): a repeat either does the work or finds it
    done. Inside an outer transaction nothing is repeated (the outer one is broken
    anyway, and its own retry repeats it all), nor is work whose COMMIT met the fault.
    When the deadline passes the caller gets Unavailable (503, "try again").
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        deadline: float | None = None
        attempt = 0
        while True:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                suspect_connections()
                if connection.in_atomic_block:
                    raise Unavailable("The database is unreachable; try again shortly.") from exc
                # Drop the broken connection; the pool hands out a checked one next.
                connection.close()
                discard_dead_connections()
                if met_while_committing(exc):
                    log.warning("%s met a transient fault at its commit (%s)", func.__name__, exc)
                    raise Unavailable("The database is unreachable; try again shortly.") from exc
                now = time.monotonic()
                if deadline is None:
                    deadline = now + settings.HITL_DB_RETRY_SECONDS
                delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
                if now + delay > deadline:
                    raise Unavailable("The database is unreachable; try again shortly.") from exc
                attempt += 1
                log.warning("%s met a transient fault (%s); retrying", func.__name__, exc)
                time.sleep(delay)

    return wrapper  # type: ignore[return-value]
