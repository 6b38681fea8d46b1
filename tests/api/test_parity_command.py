"""command.goto and command.update as LangGraph Server runs them (Agent Chat UI's "Mark
as resolved" sends goto: END), compared with langgraph itself."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END
from langgraph.types import Command

from hitl.core.models import AuditEvent, HumanInterrupt
from tests.api.client_graphs import _email
from tests.api.conftest import sdk_client
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401

pytestmark = pytest.mark.postgres


def _langgraph(*inputs) -> tuple[dict, list]:
    """The values and pending interrupt values langgraph itself ends with after these
    inputs on one thread."""
    graph = _email.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    for graph_input in inputs:
        graph.invoke(graph_input, config)
    state = graph.get_state(config)
    return state.values, [i.value for i in state.interrupts]


def _hitl(values: dict) -> tuple[dict, list]:
    pending = [i["value"] for i in values.get("__interrupt__", [])]
    return {k: v for k, v in values.items() if k != "__interrupt__"}, pending


def _paused(client) -> str:
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    return thread_id


def test_goto_end_on_a_pause_does_what_langgraph_does(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = _paused(client)
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    values = client.runs.wait(thread_id, "typed_email", command={"goto": END})
    want = _langgraph({"request": "q3"}, Command(goto=END))
    assert _hitl(values) == want
    # langgraph runs the paused node again: it asks again, as a new request.
    assert want[1] and client.threads.get(thread_id)["status"] == "interrupted"
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.CANCELLED
    assert AuditEvent.objects.filter(interrupt_id=row.pk, kind="interrupt.cancelled").exists()
    again = HumanInterrupt.objects.get(thread_id=thread_id, status="pending")
    assert again.pk != row.pk and again.action == "send_email"
    run = client.runs.list(thread_id)[0]
    assert run["kwargs"]["command"] == {"goto": END}


def test_update_with_goto_and_update_with_resume_match_langgraph(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = _paused(client)
    command = {"update": {"request": "changed"}, "goto": END}
    values = client.runs.wait(thread_id, "typed_email", command=command)
    assert _hitl(values) == _langgraph({"request": "q3"}, Command(**command))

    thread_id = _paused(client)
    resume = {"type": "accept", "args": None}
    command = {"resume": resume, "update": {"request": "q5"}}
    values = client.runs.wait(thread_id, "typed_email", command=command)
    assert values["request"] == "q5" and values["sent"]["subject"] == "Q3 report"
    want = _langgraph({"request": "q3"}, Command(resume=resume, update={"request": "q5"}))
    assert _hitl(values) == want
    # A goto that names no node is a clear 400, and changes nothing.
    thread_id = _paused(client)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(thread_id, "typed_email", command={"goto": "nowhere"})
    assert refused.value.response.status_code == 400
    assert "ask" in refused.value.response.json()["detail"]
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "pending"
