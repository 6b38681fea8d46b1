"""The database drops every session twice in a row, and is back at once each time: a
decision (the resume it queues) still goes through, with no 503."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from hitl.core.db import retry
from hitl.core.models import HumanInterrupt, Run
from tests.conftest import end_sessions
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = pytest.mark.postgres

IDLE = 4  # connections waiting in this process's pool when the fault strikes


def terminate_sessions(database_url: str) -> None:
    """What a failover does: every session of the database but this one dies."""
    with psycopg.connect(database_url, autocommit=True) as admin:
        pids = [
            row[0]
            for row in admin.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        ]
    end_sessions(database_url, pids)


def test_a_resume_after_two_session_drops_in_a_row_succeeds(
    settings, transactional_db, test_database_url, requester, reviewer, api_for, monkeypatch
):
    settings.HITL_EXECUTOR = "manual"
    monkeypatch.setattr(retry, "_suspect_until", 0.0)
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    api = api_for(reviewer)
    api.get("/api/v1/interrupts")  # the token and the user are read once, as by a client

    # The pool holds a few idle connections, all handed back a moment ago (a pool of its
    # own: threads of earlier tests may still hold some of the last one's).
    connection.close()
    connection.close_pool()
    connection.ensure_connection()  # opens the fresh pool
    connection.close()
    pool = connection.pool
    held = [pool.getconn() for _ in range(IDLE)]
    for conn in held:
        pool.putconn(conn)

    faults: list[str] = []

    def drop_sessions(execute, sql, params, many, context):
        # The decision's first statement meets the first drop; the first statement of
        # its repeat, on the connection the pool then gives, meets the second.
        if faults.count("dropped") < 2 and (not faults or faults[-1] == "raised"):
            terminate_sessions(test_database_url)
            faults.append("dropped")
        try:
            return execute(sql, params, many, context)
        except Exception:
            if faults and faults[-1] == "dropped":
                faults.append("raised")
            raise

    with connection.execute_wrapper(drop_sessions):
        response = api.post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"})

    assert faults == ["dropped", "raised", "dropped", "raised"]  # both drops were met
    assert response.status_code == 200, response.content
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.RESOLVED
    assert Run.objects.filter(thread_id=row.thread_id, kind="resume").count() == 1
    # The pool grew while the sessions dropped: the tests after this one start afresh.
    connection.close()
    connection.close_pool()
