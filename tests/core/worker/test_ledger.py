"""Approved tool calls run at most once per decision, through the ledger."""

from __future__ import annotations

import pytest
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from agents.ledger import idempotency_key
from agents.tools.approval import _execute_once
from hitl.core.models import Thread, ToolExecution
from hitl.core.worker.ledger import ThreadToolLedger
from tests.core.worker.conftest import request_for

pytestmark = pytest.mark.django_db


def counting_executor(calls: list[str]):
    def execute(request: ToolCallRequest) -> ToolMessage:
        calls.append(request.tool_call["id"])
        return ToolMessage(
            content="sent 5", tool_call_id=request.tool_call["id"], name="send_money"
        )

    return execute


def test_a_repeated_approved_call_replays_the_recorded_result(requester):
    thread = Thread.objects.create(graph="demo", requester=requester)
    calls: list[str] = []
    first = _execute_once(request_for(thread), counting_executor(calls))
    again = _execute_once(request_for(thread), counting_executor(calls))
    assert calls == ["call-1"]  # the tool ran once
    assert first.content == again.content == "sent 5"
    assert again.artifact == {"review": "replayed", "executed": True}
    [row] = ToolExecution.objects.filter(thread=thread)
    assert (row.status, row.result["content"]) == ("done", "sent 5")


def test_a_call_whose_worker_died_mid_call_is_not_repeated(requester):
    thread = Thread.objects.create(graph="demo", requester=requester)
    request = request_for(thread)
    # The first attempt recorded the start, then its worker was killed.
    key = {"tool_call_id": "call-1"}
    from agents.ledger import interrupt_id_of

    ThreadToolLedger(thread.pk).begin(
        tool="send_money", interrupt_id=interrupt_id_of(request.runtime.config), **key
    )
    calls: list[str] = []
    outcome = _execute_once(request, counting_executor(calls))
    assert calls == []
    assert outcome.status == "error" and "not run again" in outcome.content


def test_another_decision_or_call_runs_on_its_own(requester):
    thread = Thread.objects.create(graph="demo", requester=requester)
    calls: list[str] = []
    _execute_once(request_for(thread, call_id="call-1"), counting_executor(calls))
    _execute_once(request_for(thread, call_id="call-2"), counting_executor(calls))
    _execute_once(request_for(thread, call_id="call-1", ns="tools:other"), counting_executor(calls))
    assert calls == ["call-1", "call-2", "call-1"]
    assert ToolExecution.objects.filter(thread=thread).count() == 3


def test_idempotency_keys_are_stable_per_task_and_differ_between_tasks():
    a = {"configurable": {"thread_id": "t1", "checkpoint_ns": "act:1111"}}
    assert idempotency_key(a) == idempotency_key({"configurable": dict(a["configurable"])})
    assert idempotency_key(a) != idempotency_key(
        {"configurable": {"thread_id": "t1", "checkpoint_ns": "act:2222"}}
    )
    assert idempotency_key(a) != idempotency_key(
        {"configurable": {"thread_id": "t2", "checkpoint_ns": "act:1111"}}
    )


@pytest.mark.postgres  # the pooled connections; SQLite keeps its test database open anyway
@pytest.mark.django_db(transaction=True)
def test_calls_from_tool_threads_hand_their_connection_back(requester):
    # ToolNode runs tools on its executor's threads: a connection left open there would
    # never return to the pool, and a few approved calls later the worker would starve.
    import threading

    from django.db import connection

    thread = Thread.objects.create(graph="demo", requester=requester)
    ledger = ThreadToolLedger(thread.pk)
    still_open: list[bool] = []

    def approved_call(n: int) -> None:
        ledger.begin(interrupt_id="i", tool_call_id=f"call-{n}", tool="send_money")
        ledger.finish(interrupt_id="i", tool_call_id=f"call-{n}", result={"content": "ok"})
        still_open.append(connection.connection is not None)

    for n in range(12):
        worker = threading.Thread(target=approved_call, args=(n,))
        worker.start()
        worker.join()
    assert still_open == [False] * 12
    assert ToolExecution.objects.filter(thread=thread, status="done").count() == 12
