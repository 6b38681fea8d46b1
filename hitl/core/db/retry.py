"""Repeat a state change whose transaction met a transient database fault."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connection

from hitl.core.errors import Unavailable, is_transient

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

BACKOFF = (0.05, 0.25)


def retry_transient(func: F) -> F:
    """Run `func` again (after a short backoff) when the database connection failed.

    Only for services whose whole effect is one transaction that re-checks its
    preconditions under lock: a repeat either does the work or finds it done. Inside
    an outer transaction nothing is repeated (the outer one is broken anyway). When
    every attempt fails the caller gets Unavailable (503, "try again").
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        delays = iter(BACKOFF)
        while True:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if connection.in_atomic_block:
                    raise Unavailable("The database is unreachable; try again shortly.") from exc
                # Drop the broken connection; the pool hands out a checked one next.
                connection.close()
                delay = next(delays, None)
                if delay is None:
                    raise Unavailable("The database is unreachable; try again shortly.") from exc
                log.warning("%s met a transient fault (%s); retrying", func.__name__, exc)
                time.sleep(delay)

    return wrapper  # type: ignore[return-value]
