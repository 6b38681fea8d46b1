"""A thread that ran keeps its graph: one check (hitl/core/runs/graphs.py) for every surface
that binds a graph to an existing thread (runs, crons, AG-UI)."""

from __future__ import annotations

import pytest

from hitl.core import errors
from hitl.core.models import Cron, Thread
from hitl.core.resources.crons import cron_create
from hitl.core.runs.graphs import thread_graph_check
from hitl.core.runs.start import run_start

pytestmark = pytest.mark.django_db


def test_a_thread_that_never_ran_takes_any_graph(requester):
    thread = Thread.objects.create(graph="demo", requester=requester)
    thread_graph_check(thread=thread, graph="approval")


def test_a_thread_that_ran_refuses_another_graph_and_takes_its_own(settings, requester):
    settings.HITL_EXECUTOR = "manual"
    thread = run_start(graph="approval", input={}, user=requester).thread
    with pytest.raises(errors.Invalid, match="runs graph 'approval', not 'demo'"):
        thread_graph_check(thread=thread, graph="demo")
    thread_graph_check(thread=thread, graph="approval")


def test_a_caller_that_knows_the_thread_ran_is_not_asked_again(
    requester, django_assert_num_queries
):
    thread = Thread.objects.create(graph="approval", requester=requester)
    with django_assert_num_queries(0), pytest.raises(errors.Invalid):
        thread_graph_check(thread=thread, graph="demo", ran=True)


def test_a_cron_for_another_graph_on_a_thread_that_ran_is_refused(settings, requester):
    settings.HITL_EXECUTOR = "manual"
    thread = run_start(graph="approval", input={}, user=requester).thread
    with pytest.raises(errors.Invalid, match="runs graph 'approval', not 'demo'"):
        cron_create(
            user=requester,
            assistant_id="demo",
            schedule="* * * * *",
            payload={},
            thread_id=thread.pk,
        )
    assert not Cron.objects.exists()
