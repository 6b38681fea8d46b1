"""The real langgraph_sdk client against a real daphne server and a real Celery worker."""

from __future__ import annotations

import httpx
import pytest

from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from tests.api.conftest import sdk_client

pytestmark = pytest.mark.postgres


def _start_until_interrupt(client, graph="approval", input=None):
    thread = client.threads.create()
    values = client.runs.wait(thread["thread_id"], graph, input=input or {"request": "q3"})
    return thread["thread_id"], values


def test_assistants_are_the_registered_graphs(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    found = client.assistants.search(graph_id="approval")
    assert [a["graph_id"] for a in found] == ["approval"]
    by_id = client.assistants.get(found[0]["assistant_id"])
    assert by_id["graph_id"] == "approval"
    assert client.assistants.get("approval")["assistant_id"] == found[0]["assistant_id"]
    graph = client.assistants.get_graph("approval")
    assert {n["id"] for n in graph["nodes"]} >= {"propose", "finish"}


def test_a_run_pauses_and_the_thread_shows_its_interrupt(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    thread_id, values = _start_until_interrupt(client)
    (pending,) = values["__interrupt__"]
    assert pending["value"]["action_request"]["action"] == "send_email"

    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    (interrupts,) = thread["interrupts"].values()
    assert interrupts == [{"value": pending["value"], "id": pending["id"]}]
    assert thread["values"] == {"request": "q3"}
    assert thread["metadata"]["graph_id"] == "approval"

    state = client.threads.get_state(thread_id)
    assert state["next"] == ["propose"]
    assert state["interrupts"][0]["id"] == pending["id"]
    assert state["tasks"][0]["interrupts"][0]["value"] == pending["value"]
    history = client.threads.get_history(thread_id, limit=5)
    assert len(history) >= 2
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]

    (run,) = client.runs.list(thread_id)
    assert run["status"] == "interrupted"
    assert client.runs.get(thread_id, run["run_id"])["run_id"] == run["run_id"]
    # The interrupt is an ordinary HumanInterrupt row, waiting for any reviewer.
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert (row.interrupt_id, row.status) == (pending["id"], "pending")


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"type": "accept", "args": None}, {"type": "accept", "args": None}),
        (
            {
                "type": "edit",
                "args": {
                    "action": "send_email",
                    "args": {"to": "cfo@example.com", "subject": "Q3", "copies": 2, "urgent": True},
                },
            },
            {
                "type": "edit",
                "args": {
                    "action": "send_email",
                    "args": {"to": "cfo@example.com", "subject": "Q3", "copies": 2, "urgent": True},
                },
            },
        ),
        (
            {"type": "response", "args": "Wait for the numbers."},
            {"type": "response", "args": "Wait for the numbers."},
        ),
        ({"type": "ignore", "args": None}, {"type": "ignore", "args": None}),
    ],
    ids=["accept", "edit", "response", "ignore"],
)
def test_resume_with_each_human_response_type(live, reviewer, response, expected):
    client = sdk_client(live.base_url, reviewer)
    thread_id, values = _start_until_interrupt(client)
    interrupt_id = values["__interrupt__"][0]["id"]

    final = client.runs.wait(thread_id, "approval", command={"resume": response})

    assert final["decision"] == expected
    assert final["sent"] is (expected["type"] in ("accept", "edit"))
    row = HumanInterrupt.objects.select_related("responded_by").get(thread_id=thread_id)
    assert (row.status, row.response_type, row.responded_by) == (
        "resolved",
        expected["type"],
        reviewer,
    )
    assert AuditEvent.objects.filter(
        interrupt=row, kind="interrupt.answered", actor=reviewer
    ).exists()
    assert client.threads.get(thread_id)["status"] == "idle"
    assert Thread.objects.get(pk=thread_id).status == "done"
    assert row.interrupt_id == interrupt_id


def test_resume_by_interrupt_id_map_and_agent_inbox_list(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    thread_id, values = _start_until_interrupt(client)
    interrupt_id = values["__interrupt__"][0]["id"]
    # The Agent Inbox sends a list holding the one HumanResponse, keyed here by id.
    run = client.runs.create(
        thread_id,
        "approval",
        command={"resume": {interrupt_id: [{"type": "accept", "args": None}]}},
    )
    assert run["status"] == "pending"
    final = client.runs.join(thread_id, run["run_id"])
    assert final["decision"] == {"type": "accept", "args": None}
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"


def test_a_stream_carries_values_updates_and_messages(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    thread = client.threads.create()
    parts = list(
        client.runs.stream(
            thread["thread_id"],
            "client_tools",
            input={"messages": [{"role": "user", "content": "hello", "id": "u1"}]},
            stream_mode=["values", "updates", "messages-tuple", "events"],
        )
    )
    kinds = [p.event for p in parts]
    assert kinds[0] == "metadata"
    run_id = parts[0].data["run_id"]
    assert Run.objects.get(pk=run_id).status == "success"
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates, kinds
    assert updates[-1]["model"]["messages"][0]["content"] == "You said: hello"
    messages = [p.data for p in parts if p.event == "messages"]
    assert messages[0][0]["content"] == "You said: hello"
    assert messages[0][1]["langgraph_node"] == "model"
    final_values = [p.data for p in parts if p.event == "values"][-1]
    assert [m["content"] for m in final_values["messages"]] == ["hello", "You said: hello"]
    assert any(p.event == "events" and p.data["event"] == "on_chain_end" for p in parts)


def test_a_stream_ends_at_the_interrupt_and_a_resume_stream_finishes(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    thread = client.threads.create()
    first = list(
        client.runs.stream(
            thread["thread_id"], "approval", input={"request": "q4"}, stream_mode="updates"
        )
    )
    interrupt_update = [p.data for p in first if p.event == "updates" and "__interrupt__" in p.data]
    assert (
        interrupt_update[0]["__interrupt__"][0]["value"]["action_request"]["action"] == "send_email"
    )
    second = list(
        client.runs.stream(
            thread["thread_id"],
            "approval",
            command={"resume": {"type": "accept", "args": None}},
            stream_mode="values",
        )
    )
    assert second[-1].event == "values"
    assert second[-1].data["sent"] is True


def test_join_stream_follows_a_run_to_its_end(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    thread = client.threads.create()
    run = client.runs.create(thread["thread_id"], "approval", input={"request": "q1"})
    parts = list(client.runs.join_stream(thread["thread_id"], run["run_id"], stream_mode="values"))
    assert parts[0].event == "metadata"
    assert parts[-1].event == "values"
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"


def test_threads_search_filters_by_status_metadata_and_pages(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    paused, _ = _start_until_interrupt(client)
    tagged = client.threads.create(metadata={"team": "finance"})["thread_id"]
    client.threads.create(metadata={"team": "ops"})

    interrupted = client.threads.search(status="interrupted")
    assert [t["thread_id"] for t in interrupted] == [paused]
    assert interrupted[0]["interrupts"]
    assert [t["thread_id"] for t in client.threads.search(metadata={"team": "finance"})] == [tagged]
    everything = client.threads.search(limit=10, sort_by="created_at", sort_order="asc")
    assert everything[0]["thread_id"] == paused
    assert [
        t["thread_id"]
        for t in client.threads.search(limit=1, offset=1, sort_by="created_at", sort_order="asc")
    ] == [tagged]
    assert client.threads.count(status="idle") == 2


def test_cancel_of_a_paused_run_is_404_and_mark_as_resolved_withdraws(live, reviewer, requester):
    owner = sdk_client(live.base_url, requester)
    thread_id, values = _start_until_interrupt(owner)
    (run,) = owner.runs.list(thread_id)
    # As LangGraph Server: a paused run is not among the cancellable ones.
    with pytest.raises(httpx.HTTPStatusError) as not_found:
        owner.runs.cancel(thread_id, run["run_id"])
    assert not_found.value.response.status_code == 404
    assert "__end__" in not_found.value.response.json()["detail"]
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "pending"
    owner.threads.update_state(thread_id, None, as_node="__end__")
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "cancelled"
    assert owner.threads.get(thread_id)["status"] == "idle"
    assert owner.threads.get(thread_id)["interrupts"] == {}


def test_errors_are_clear_4xx(live, reviewer, outsider, requester):
    client = sdk_client(live.base_url, reviewer)
    thread_id, values = _start_until_interrupt(client)

    with pytest.raises(httpx.HTTPStatusError) as bad_token:
        from langgraph_sdk import get_sync_client

        get_sync_client(url=f"{live.base_url}/langgraph", api_key="hitl_wrong").threads.search()
    assert bad_token.value.response.status_code == 401

    with pytest.raises(httpx.HTTPStatusError) as unknown_graph:
        client.runs.create(None, "no-such-graph", input={})
    assert unknown_graph.value.response.status_code == 404
    assert "no-such-graph" in unknown_graph.value.response.json()["detail"]

    with pytest.raises(httpx.HTTPStatusError) as other_users_thread:
        sdk_client(live.base_url, outsider).threads.get(thread_id)
    assert other_users_thread.value.response.status_code == 404

    with pytest.raises(httpx.HTTPStatusError) as wrong_shape:
        client.runs.create(thread_id, "approval", command={"resume": {"type": "approve-it"}})
    assert wrong_shape.value.response.status_code == 400

    # A requester who is not a reviewer cannot answer, just like in the UI.
    mine, _ = _start_until_interrupt(sdk_client(live.base_url, requester))
    with pytest.raises(httpx.HTTPStatusError) as not_a_reviewer:
        sdk_client(live.base_url, requester).runs.create(
            mine, "approval", command={"resume": {"type": "accept"}}
        )
    assert not_a_reviewer.value.response.status_code == 403

    client.runs.wait(thread_id, "approval", command={"resume": {"type": "accept"}})
    with pytest.raises(httpx.HTTPStatusError) as answered:
        client.runs.create(
            thread_id,
            "approval",
            command={"resume": {values["__interrupt__"][0]["id"]: {"type": "ignore"}}},
        )
    assert answered.value.response.status_code == 409
    assert "already answered by rita" in answered.value.response.json()["detail"]
    assert HumanInterrupt.objects.get(thread_id=thread_id).response_type == "accept"
