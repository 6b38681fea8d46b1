"""Every `client.threads` parameter of langgraph_sdk, through the real SDK against daphne
and a Celery worker: what HITL honours does what LangGraph Server does, what it refuses
is a clear 4xx that changes nothing."""

from __future__ import annotations

import uuid

import httpx
import pytest

from hitl.core.models import AuditEvent, Thread
from tests.api.conftest import refused_status, sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401

pytestmark = pytest.mark.postgres


def test_threads_are_created_read_counted_and_changed_with_every_parameter(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = str(uuid.uuid4())
    made = client.threads.create(
        metadata={"team": "finance"}, thread_id=thread_id, graph_id="typed_email"
    )
    assert made["thread_id"] == thread_id
    assert made["metadata"]["team"] == "finance"
    assert made["metadata"]["graph_id"] == "typed_email"
    assert refused_status(lambda: client.threads.create(thread_id=thread_id)) == 409
    same = client.threads.create(thread_id=thread_id, if_exists="do_nothing", metadata={"x": 1})
    assert same["metadata"] == made["metadata"]

    # `include` names optional fields; LangGraph's only one, ttl, no HITL thread has.
    read = client.threads.get(thread_id, include=["ttl"])
    assert read["thread_id"] == thread_id and "ttl" not in read
    assert client.threads.count(metadata={"team": "finance"}, status="idle") == 1
    assert client.threads.count(metadata={"team": "ops"}) == 0

    changed = client.threads.update(thread_id, metadata={"tier": 2})
    assert changed["metadata"] == {**made["metadata"], "tier": 2}
    assert client.threads.update(thread_id, metadata={"tier": 3}, return_minimal=True) is None
    assert Thread.objects.get(pk=thread_id).metadata["tier"] == 3
    found = client.threads.search(
        ids=[thread_id], metadata={"tier": 3}, status="idle", limit=5, offset=0
    )
    assert [t["thread_id"] for t in found] == [thread_id]


def test_state_reads_take_a_checkpoint_subgraphs_and_select(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "nested", input={"request": "q3"})

    state = client.threads.get_state(thread_id)
    (task,) = state["tasks"]
    assert task["name"] == "review" and task["state"] is None
    assert task["checkpoint"]["checkpoint_ns"].startswith("review:")
    # With subgraphs, the paused subgraph's own state, as LangGraph Server shows it.
    (inner,) = client.threads.get_state(thread_id, subgraphs=True)["tasks"]
    assert inner["state"]["values"]["notes"] == ["draft for the board"]
    assert inner["state"]["next"] == ["approve"]

    picked = client.threads.get_state(thread_id, select=["values.request", "next"])
    assert picked == {"values": {"request": "q3"}, "next": ["review"]}
    head = state["checkpoint"]
    at = client.threads.get_state(thread_id, checkpoint=head, subgraphs=True, select=["tasks"])
    assert list(at) == ["tasks"] and at["tasks"][0]["state"]["next"] == ["approve"]
    parent = state["parent_checkpoint"]["checkpoint_id"]
    older = client.threads.get_state(thread_id, checkpoint_id=parent, select=["checkpoint"])
    assert older == {"checkpoint": {**head, "checkpoint_id": parent}}
    assert refused_status(lambda: client.threads.get_state(thread_id, select=["valuez"])) == 400

    history = client.threads.get_history(thread_id, limit=10)
    assert history[0]["checkpoint"] == head and len(history) >= 3
    assert client.threads.get_history(thread_id, limit=2)[1] == history[1]
    before = client.threads.get_history(thread_id, before=history[0]["checkpoint"], limit=1)
    assert before == [history[1]]
    inputs = client.threads.get_history(thread_id, metadata={"source": "input"})
    assert inputs and all(h["metadata"]["source"] == "input" for h in inputs)
    one = client.threads.get_history(thread_id, checkpoint={"checkpoint_id": parent})
    assert [h["checkpoint"]["checkpoint_id"] for h in one] == [parent]
    only = client.threads.get_history(thread_id, limit=3, select=["checkpoint", "values.steps"])
    assert [set(h) for h in only] == [{"checkpoint", "values"}] * 3
    assert only[0]["values"] == {"steps": ["prepare"]}


def test_update_state_writes_at_a_checkpoint_and_copy_carries_the_thread(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    client.runs.wait(thread_id, "typed_email", command={"resume": {"type": "accept"}})
    first = client.threads.get_history(thread_id, limit=100)[-2]["checkpoint"]

    written = client.threads.update_state(
        thread_id, {"request": "from the start"}, as_node="ask", checkpoint=first
    )
    state = client.threads.get_state(thread_id)
    assert state["checkpoint"]["checkpoint_id"] == written["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint"]["checkpoint_id"] == first["checkpoint_id"]
    assert state["values"]["request"] == "from the start" and state["next"] == ["send"]
    again = client.threads.update_state(
        thread_id, {"request": "by id"}, as_node="ask", checkpoint_id=first["checkpoint_id"]
    )
    assert client.threads.get_state(thread_id)["values"]["request"] == "by id"
    assert again["checkpoint"]["checkpoint_id"] != written["checkpoint"]["checkpoint_id"]

    copy = client.threads.copy(thread_id)
    assert copy["thread_id"] != thread_id
    assert client.threads.get_state(copy["thread_id"])["values"]["request"] == "by id"
    assert AuditEvent.objects.filter(kind="thread.state_updated").count() == 2


def test_prune_deletes_the_named_threads_and_keep_latest_is_refused(
    stack16,  # noqa: F811
    reviewer,
    outsider,
):
    client = sdk_client(stack16.base_url, reviewer)
    mine = [client.threads.create()["thread_id"] for _ in range(2)]
    theirs = sdk_client(stack16.base_url, outsider).threads.create()["thread_id"]

    assert refused_status(lambda: client.threads.prune(mine, strategy="keep_latest")) == 400
    assert Thread.objects.filter(pk__in=mine).count() == 2
    # A thread the caller cannot see is not theirs to prune: skipped, not counted.
    assert client.threads.prune([*mine, theirs]) == {"pruned_count": 2}
    assert not Thread.objects.filter(pk__in=mine).exists()
    assert Thread.objects.filter(pk=theirs).exists()
    assert AuditEvent.objects.filter(kind="thread.deleted").count() == 2
    assert client.threads.prune([]) == {"pruned_count": 0}


def test_prune_deletes_nothing_when_one_thread_is_not_the_callers(
    stack16,  # noqa: F811
    reviewer,
    requester,
):
    theirs = sdk_client(stack16.base_url, requester)
    paused = theirs.threads.create()["thread_id"]
    theirs.runs.wait(paused, "typed_email", input={"request": "q3"})
    client = sdk_client(stack16.base_url, reviewer)  # sees it (a reviewer), may not delete it
    mine = client.threads.create()["thread_id"]
    assert refused_status(lambda: client.threads.prune([mine, paused])) == 403
    assert Thread.objects.filter(pk__in=[mine, paused]).count() == 2


def test_the_v2_thread_session_is_refused_with_a_reason(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    for transport in ("sse", "websocket"):
        session = client.threads.stream(thread_id, assistant_id="typed_email", transport=transport)
        with pytest.raises(httpx.HTTPStatusError) as refused, session:
            session.run.start(input={"request": "q3"})
        assert refused.value.response.status_code == 404
        assert "not served by HITL" in refused.value.response.json()["detail"]
    for path in ("commands", "stream/events"):
        response = httpx.post(
            f"{stack16.base_url}/langgraph/threads/{thread_id}/{path}",
            json={},
            headers={"x-api-key": token_for(reviewer)},
        )
        assert response.status_code == 404
        assert "not served by HITL" in response.json()["detail"]
    assert not client.runs.list(thread_id)
