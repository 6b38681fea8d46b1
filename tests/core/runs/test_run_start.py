"""Starting a run on an existing thread: the graph it binds, and refusals that write nothing.

On PostgreSQL the thread's change and the run's insert are one statement
(hitl/core/db/run_statements.py); elsewhere the ORM path does the same. Both are checked here.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from hitl.api.langgraph import services as lg_services
from hitl.core import errors, runs
from hitl.core.db import prepared
from hitl.core.models import Run, Thread

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["one statement", "orm"])
def path(request, monkeypatch):
    if request.param == "orm":
        monkeypatch.setattr(prepared, "available", lambda: False)
    elif not prepared.available():
        pytest.skip("the one-statement path is PostgreSQL's")
    return request.param


def test_a_thread_that_never_ran_takes_the_runs_graph(path, requester):
    thread = lg_services.thread_create(user=requester)
    assert thread.graph != "approval"
    run = lg_services.run_create(
        user=requester, assistant_id="approval", thread_id=thread.pk, input={"x": [1, 2]}
    )
    stored = Run.objects.select_related("thread").get(pk=run.pk)
    assert (stored.thread.graph, stored.thread.status) == ("approval", "busy")
    assert (stored.kind, stored.status, stored.input) == ("start", "queued", {"x": [1, 2]})
    assert stored.created_by_id == requester.pk and stored.dispatched_at is not None
    assert stored.created_at == run.created_at


def test_a_thread_that_ran_one_graph_refuses_another_and_writes_nothing(path, requester):
    thread = lg_services.thread_create(user=requester)
    first = lg_services.run_create(
        user=requester, assistant_id="approval", thread_id=thread.pk, input={}
    )
    Run.objects.filter(pk=first.pk).update(status="success")
    Thread.objects.filter(pk=thread.pk).update(status="done")
    before = Thread.objects.get(pk=thread.pk).updated_at
    with pytest.raises(errors.Invalid, match="runs graph 'approval', not 'demo'"):
        lg_services.run_create(user=requester, assistant_id="demo", thread_id=thread.pk, input={})
    after = Thread.objects.get(pk=thread.pk)
    assert (after.graph, after.status, after.updated_at) == ("approval", "done", before)
    assert list(Run.objects.filter(thread=thread).values_list("pk", flat=True)) == [first.pk]


def test_a_thread_that_ran_starts_again_on_its_own_graph(path, requester):
    thread = lg_services.thread_create(user=requester)
    first = lg_services.run_create(
        user=requester, assistant_id="approval", thread_id=thread.pk, input={}
    )
    Run.objects.filter(pk=first.pk).update(status="success")
    Thread.objects.filter(pk=thread.pk).update(status="done")
    again = lg_services.run_create(
        user=requester, assistant_id="approval", thread_id=thread.pk, input={"n": 2}
    )
    assert Run.objects.filter(thread=thread).count() == 2
    assert Run.objects.get(pk=again.pk).input == {"n": 2}
    assert Thread.objects.get(pk=thread.pk).status == "busy"


def test_a_busy_thread_refuses_a_second_run_and_writes_nothing(path, requester):
    thread = lg_services.thread_create(user=requester)
    lg_services.run_create(user=requester, assistant_id="approval", thread_id=thread.pk, input={})
    with pytest.raises(errors.Conflict, match="busy"):
        lg_services.run_create(
            user=requester, assistant_id="approval", thread_id=thread.pk, input={}
        )
    assert Run.objects.filter(thread=thread).count() == 1


@pytest.mark.postgres
def test_a_queued_run_is_stamped_dispatched_in_its_own_transaction(requester):
    # The send after commit then costs no write; a failed send clears the stamp
    # (tests/ops/test_processes.py covers that with Redis down).
    before = timezone.now()
    run = runs.run_start(graph="demo", input={}, user=requester)
    stamped = Run.objects.get(pk=run.pk).dispatched_at
    assert stamped is not None and stamped >= before
