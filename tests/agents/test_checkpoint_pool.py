"""The checkpointer pool's check: a round trip only for connections idle a while."""

from __future__ import annotations

import time

import psycopg
import pytest

from agents.checkpoint import CHECK_AFTER_IDLE_SECONDS, _check_if_idle, _mark_returned

pytestmark = pytest.mark.postgres


def test_a_dropped_connection_is_found_only_once_it_was_idle(test_database_url):
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        conn = psycopg.connect(test_database_url, autocommit=True)
        pid = conn.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        _mark_returned(conn)
        _check_if_idle(conn)  # used a moment ago: no round trip, so nothing noticed
        conn._hitl_returned = time.monotonic() - CHECK_AFTER_IDLE_SECONDS
        with pytest.raises(psycopg.OperationalError):
            _check_if_idle(conn)  # idle long enough: checked, and the dead session shows
        conn.close()
