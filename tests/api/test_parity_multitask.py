"""Double-texting (multitask_strategy) and runs.cancel(action="rollback") as LangGraph
Server has them, with what becomes of pending HumanInterrupts, through langgraph_sdk."""

from __future__ import annotations

import httpx
import pytest

from hitl.core.models import AuditEvent, HumanInterrupt, Run
from tests.api.conftest import sdk_client
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def _status(run_id: str) -> str | None:
    run = Run.objects.filter(pk=run_id).first()
    return run.status if run else None


def _running(client, thread_id: str, graph: str, **input) -> str:
    run_id = client.runs.create(thread_id, graph, input=input)["run_id"]
    wait_for(lambda: _status(run_id) == Run.Status.RUNNING, 30, 0.02, "the run to start")
    return run_id


def _reason(run_id: str) -> str:
    event = AuditEvent.objects.get(kind="run.cancelled", data__run_id=run_id)
    return event.data["reason"]


def test_reject_is_the_default_and_interrupt_cancels_the_run_in_flight(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    first = _running(client, thread_id, "ticker", pause=0.3)
    with pytest.raises(httpx.HTTPStatusError) as busy:
        client.runs.create(thread_id, "ticker", input={"pause": 0.01})
    assert busy.value.response.status_code == 409
    done = client.runs.wait(
        thread_id, "ticker", input={"pause": 0.01}, multitask_strategy="interrupt"
    )
    assert done["ticks"] == 24 and done["pause"] == 0.01
    assert _status(first) == Run.Status.CANCELLED
    second = Run.objects.get(thread_id=thread_id, status=Run.Status.SUCCESS)
    assert _reason(first) == f"superseded by run {second.pk} (multitask_strategy=interrupt)"
    assert client.runs.get(thread_id, str(second.pk))["multitask_strategy"] == "reject"


def test_rollback_deletes_the_run_in_flight_and_its_state(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "ticker", input={"pause": 0.01})
    in_flight = _running(client, thread_id, "ticker", pause=0.3)
    # Its input is checkpointed: the state the rollback has to undo.
    wait_for(
        lambda: client.threads.get_state(thread_id)["values"]["pause"] == 0.3, 30, 0.05, "input"
    )
    done = client.runs.wait(thread_id, "ticker", input={"ticks": 0}, multitask_strategy="rollback")
    # The new run went on from the state before the rolled-back one (pause 0.01).
    assert done["pause"] == 0.01 and done["ticks"] == 24
    assert _status(in_flight) is None  # deleted, as LangGraph deletes it
    assert "multitask_strategy=rollback" in _reason(in_flight)
    assert len(client.runs.list(thread_id)) == 2


def test_cancel_with_rollback_takes_the_state_back(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "ticker", input={"pause": 0.01})
    in_flight = _running(client, thread_id, "ticker", pause=0.3)
    wait_for(
        lambda: client.threads.get_state(thread_id)["values"]["pause"] == 0.3, 30, 0.05, "input"
    )
    client.runs.cancel(thread_id, in_flight, action="rollback")
    assert _status(in_flight) is None and _reason(in_flight) == "rolled back"
    assert client.threads.get(thread_id)["status"] == "idle"
    assert client.threads.get_state(thread_id)["values"]["pause"] == 0.01
    with pytest.raises(httpx.HTTPStatusError) as gone:
        client.runs.cancel(thread_id, in_flight, action="rollback")
    assert gone.value.response.status_code == 404


def test_enqueue_waits_for_the_run_in_flight(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    first = _running(client, thread_id, "ticker", pause=0.1)
    queued = client.runs.create(
        thread_id, "ticker", input={"pause": 0.01}, multitask_strategy="enqueue"
    )
    assert queued["multitask_strategy"] == "enqueue"
    assert _status(queued["run_id"]) == Run.Status.QUEUED
    client.runs.join(thread_id, queued["run_id"])
    runs = {str(r.pk): r for r in Run.objects.filter(thread_id=thread_id)}
    assert runs[first].status == runs[queued["run_id"]].status == Run.Status.SUCCESS
    assert runs[queued["run_id"]].started_at >= runs[first].finished_at


def test_an_enqueued_run_supersedes_the_pause_it_finds(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    first = _running(client, thread_id, "configured", pause=1.0)
    queued = client.runs.create(thread_id, "configured", input={}, multitask_strategy="enqueue")
    client.runs.join(thread_id, queued["run_id"])
    assert _status(first) == Run.Status.INTERRUPTED
    old = HumanInterrupt.objects.get(run_id=first)
    assert old.status == HumanInterrupt.Status.CANCELLED
    assert AuditEvent.objects.filter(
        kind="interrupt.cancelled", interrupt_id=old.pk, data__reason="superseded by new input"
    ).exists()
    assert HumanInterrupt.objects.get(run_id=queued["run_id"]).status == "pending"
    assert client.threads.get(thread_id)["status"] == "interrupted"
