"""interrupt_before / interrupt_after as LangGraph runs them; a breakpoint is a pause a
reviewer continues in the reviewer app (or a client continues with no input)."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from hitl.core.models import HumanInterrupt
from tests.api.client_graphs import _configured
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401

pytestmark = pytest.mark.postgres


def _langgraph_next(**breakpoints) -> tuple[list[str], int]:
    graph = _configured.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({}, config, **breakpoints)
    state = graph.get_state(config)
    return list(state.next), len(state.values["seen"])


def _at_breakpoint(client, thread_id: str, **breakpoints) -> HumanInterrupt:
    paused = client.runs.wait(thread_id, "configured", input={}, **breakpoints)
    # On purpose (docs/langgraph-api.md): the pause is listed as a "continue" request, where LangGraph
    # Server lists none, so that chat UIs and the Agent Inbox show it.
    (listed,) = paused["__interrupt__"]
    assert listed["value"]["action_request"]["action"] == "continue"
    state = client.threads.get_state(thread_id)
    assert (state["next"], len(state["values"]["seen"])) == _langgraph_next(**breakpoints)
    assert client.threads.get(thread_id)["status"] == "interrupted"
    return HumanInterrupt.objects.get(thread_id=thread_id, status="pending")


@pytest.mark.parametrize(
    "breakpoints", [{"interrupt_before": ["ask"]}, {"interrupt_after": ["before"]}]
)
def test_a_reviewer_continues_a_breakpoint_in_the_reviewer_app(stack16, reviewer, breakpoints):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    row = _at_breakpoint(client, thread_id, **breakpoints)
    assert row.interrupt_id.startswith("breakpoint:") and row.action == "continue"
    assert row.allowed_types == ["accept"] and "ask" in row.description
    page = httpx.get(
        f"{stack16.base_url}/threads/{thread_id}/",
        cookies={"sessionid": _session(reviewer)},
        follow_redirects=False,
    )
    assert page.status_code == 200 and "breakpoint" in page.text
    answer = httpx.post(
        f"{stack16.base_url}/api/v1/interrupts/{row.pk}/decision",
        json={"type": "accept"},
        headers={"x-api-key": token_for(reviewer)},
    )
    assert answer.status_code == 200, answer.text
    # The graph went on to its own interrupt, and the breakpoint did not answer it.
    done = client.runs.join(thread_id, client.runs.list(thread_id)[0]["run_id"])
    assert done["__interrupt__"][0]["value"]["action_request"]["action"] == "go_on"
    assert "answer" not in done
    assert HumanInterrupt.objects.get(thread_id=thread_id, status="pending").action == "go_on"


def test_a_client_continues_a_breakpoint_with_no_input(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    row = _at_breakpoint(client, thread_id, interrupt_before=["ask"])
    done = client.runs.wait(thread_id, "configured")
    assert done["__interrupt__"][0]["value"]["action_request"]["action"] == "go_on"
    assert len(done["seen"]) == 1  # "before" did not run again
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.CANCELLED


def test_a_client_answers_a_breakpoint_as_any_request(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    row = _at_breakpoint(client, thread_id, interrupt_after=["before"])
    done = client.runs.wait(thread_id, "configured", command={"resume": {"type": "accept"}})
    assert done["__interrupt__"][0]["value"]["action_request"]["action"] == "go_on"
    assert len(done["seen"]) == 1
    row.refresh_from_db()
    assert (row.status, row.response_type) == (HumanInterrupt.Status.RESOLVED, "accept")


def test_breakpoints_naming_no_node_are_a_clear_400(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(thread_id, "configured", input={}, interrupt_before=["nowhere"])
    assert refused.value.response.status_code == 400
    assert "interrupt_before" in refused.value.response.json()["detail"]
    everywhere = client.runs.wait(thread_id, "configured", input={}, interrupt_before="*")
    assert client.threads.get_state(thread_id)["next"] == ["before"]
    assert "seen" not in everywhere


def _session(user) -> str:
    from django.test import Client

    browser = Client()
    browser.force_login(user)
    return browser.cookies["sessionid"].value
