"""A run request whose COMMIT met a dropped session: answered with the run it made, or
made again when it made none; never two runs, never an error for the client."""

from __future__ import annotations

import django.db
import psycopg
import pytest
from django.http import HttpRequest
from django.test import RequestFactory

from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph.run_create import create_run
from hitl.api.langgraph.schemas import RunCreateIn
from hitl.core.db import prepared, run_statements
from hitl.core.models import Run, Thread

pytestmark = pytest.mark.postgres


def _commit_fault():
    """A fault raised from a frame named as Django's commit (django/db/backends/base)."""

    def dropped():
        try:
            raise psycopg.OperationalError("terminating connection due to administrator command")
        except psycopg.OperationalError as exc:
            raise django.db.OperationalError(str(exc)) from exc

    namespace = {"dropped": dropped}
    source = "def _commit():\n    dropped()\n"
    exec(compile(source, "/x/django/db/backends/base/base.py", "exec"), namespace)
    return namespace["_commit"]


def _a_start(requester) -> tuple[Thread, HttpRequest, RunCreateIn]:
    """A new thread of the requester's, and a runs/wait request that starts a run on it."""
    thread = lg_services.thread_create(user=requester)
    request = RequestFactory().post(f"/langgraph/threads/{thread.pk}/runs/wait")
    request.user = requester
    return thread, request, RunCreateIn(assistant_id="approval", input={"request": "q1"})


@pytest.mark.parametrize("committed", [True, False])
def test_a_run_whose_commit_met_a_fault_exists_once(
    transactional_db, manual_runs, requester, monkeypatch, committed
):
    thread, request, body = _a_start(requester)
    real = lg_services.run_create
    fault = _commit_fault()
    calls = []

    def flaky_run_create(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            if committed:
                real(**kwargs)  # committed, then the answer to COMMIT was lost
            fault()
        return real(**kwargs)

    monkeypatch.setattr(lg_services, "run_create", flaky_run_create)
    run = create_run(request, body, thread.pk, stateless=False)

    (only,) = Run.objects.filter(thread=thread)
    assert run.pk == only.pk and only.kind == "start"
    assert len(calls) == (1 if committed else 2)


@pytest.mark.parametrize("committed", [True, False])
def test_a_start_whose_single_statement_met_a_fault_exists_once(
    transactional_db, manual_runs, requester, monkeypatch, committed
):
    # The start on the requester's settled thread is one statement outside any
    # transaction: a fault during it leaves its commit in doubt, as a COMMIT's would.
    thread, request, body = _a_start(requester)
    real = run_statements.run_start_settled
    calls = []

    def dropped_while_answering(**kwargs):
        calls.append(1)
        if len(calls) > 1:
            return real(**kwargs)

        def execute(cursor, sql, params=None):
            if committed:
                cursor.execute(sql, params)  # it committed; then the answer was lost
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        cursor_of = prepared.cursor

        def cursor():
            wrapped = cursor_of()
            monkeypatch.setattr(
                wrapped, "execute", lambda sql, params=None: execute(wrapped.cursor, sql, params)
            )
            return wrapped

        monkeypatch.setattr(prepared, "cursor", cursor)
        try:
            return real(**kwargs)
        finally:
            monkeypatch.setattr(prepared, "cursor", cursor_of)

    monkeypatch.setattr(run_statements, "run_start_settled", dropped_while_answering)
    run = create_run(request, body, thread.pk, stateless=False)

    (only,) = Run.objects.filter(thread=thread)
    assert run.pk == only.pk and only.kind == "start"
    assert len(calls) == (1 if committed else 2)
