"""Cancelling a thread cancels its pending items; a cancelled thread starts again, a busy one
refuses."""

from __future__ import annotations

import pytest

from hitl.core import errors, runs
from hitl.core.models import HumanInterrupt, Run
from tests.conftest import decide
from tests.core.conftest import pending, resume

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("in_process_graphs")]


def test_thread_cancel_cancels_pending_interrupts(start, requester, reviewer, outsider):
    thread = start("parallel_approval")
    first, second = pending(thread)
    decide(first, reviewer, "accept")

    with pytest.raises(errors.Forbidden):
        runs.thread_cancel(thread=thread, user=outsider)
    runs.thread_cancel(thread=thread, user=requester)

    thread.refresh_from_db()
    assert thread.status == "idle"
    statuses = dict(HumanInterrupt.objects.filter(thread=thread).values_list("pk", "status"))
    assert statuses == {first.pk: "resolved", second.pk: "cancelled"}
    with pytest.raises(errors.Conflict, match="cancelled"):
        decide(second, reviewer, "accept")
    assert not Run.objects.filter(thread=thread, kind="resume").exists()


def test_a_cancelled_thread_can_start_again_and_pauses_anew(
    start, manual_runs, requester, reviewer
):
    thread = start("approval", {"request": "first"})
    [old] = pending(thread)
    runs.thread_cancel(thread=thread, user=requester)

    run = runs.run_start(
        graph="approval", input={"request": "second"}, user=requester, thread=thread
    )
    assert manual_runs(run) == "interrupted"
    thread.refresh_from_db()
    assert thread.status == "interrupted"
    [new] = pending(thread)
    assert new.pk != old.pk
    assert new.args["subject"] == "Re: second"
    decide(new, reviewer, "accept")
    assert resume(thread, manual_runs).result["decision"] == {"type": "accept", "args": None}


def test_a_busy_or_interrupted_thread_refuses_a_new_run(start, requester):
    thread = start("approval")
    with pytest.raises(errors.Conflict, match="interrupted"):
        runs.run_start(graph="approval", input={}, user=requester, thread=thread)
