"""A run request whose COMMIT met a dropped session: answered with the run it made, or
made again when it made none; never two runs, never an error for the client."""

from __future__ import annotations

import django.db
import psycopg
import pytest
from django.test import RequestFactory

from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph.run_create import create_run
from hitl.api.langgraph.schemas import RunCreateIn
from hitl.core.models import Run

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


@pytest.mark.parametrize("committed", [True, False])
def test_a_run_whose_commit_met_a_fault_exists_once(
    transactional_db, manual_runs, requester, monkeypatch, committed
):
    thread = lg_services.thread_create(user=requester)
    request = RequestFactory().post(f"/langgraph/threads/{thread.pk}/runs/wait")
    request.user = requester
    body = RunCreateIn(assistant_id="approval", input={"request": "q1"})
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
