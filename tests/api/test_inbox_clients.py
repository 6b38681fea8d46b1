"""Third-party clients unchanged: the Agent Inbox's exact request bodies, the real
langgraph_sdk, against a real daphne server and a real Celery worker."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import httpx
import pytest

from hitl.core.models import AuditEvent, HumanInterrupt, Thread
from tests.api.client_graphs import CLIENT_GRAPHS, EMAIL_ARGS
from tests.api.conftest import STACK_ENV, Stack, running_stack, sdk_client, token_for
from tests.conftest import ROOT

pytestmark = pytest.mark.postgres

CLIENT_ENV = {
    **STACK_ENV,
    "HITL_EXTRA_GRAPHS": CLIENT_GRAPHS,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


@pytest.fixture(scope="module")
def client_stack(test_database_url, tmp_path_factory) -> Iterator[Stack]:
    """daphne + one Celery worker that both know the client test graphs."""
    log_dir = tmp_path_factory.mktemp("clients")
    with running_stack(test_database_url, log_dir, name="w16clients", **CLIENT_ENV) as stack:
        yield stack


@pytest.fixture
def stack16(client_stack, transactional_db, monkeypatch) -> Stack:
    from hitl.core.registry import registry
    from tests.api.client_graphs import TARGETS

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)
    return client_stack


def _paused(client, graph: str = "typed_email") -> tuple[str, dict]:
    thread = client.threads.create()
    values = client.runs.wait(thread["thread_id"], graph, input={"request": "q3"})
    return thread["thread_id"], values


def _inbox_post(base_url: str, user, path: str, body: dict) -> httpx.Response:
    """POST exactly what the Agent Inbox's @langchain/langgraph-sdk client sends."""
    return httpx.post(
        f"{base_url}/langgraph{path}",
        content=json.dumps(body),
        headers={"Content-Type": "application/json", "x-api-key": token_for(user)},
        timeout=60,
    )


def _inbox_resume_body(resume, graph: str = "typed_email") -> dict:
    # ThreadContext.sendHumanResponse -> client.runs.stream(threadId, graphId,
    # {command: {resume: [input]}, streamMode: "events"}); the JS client drops
    # undefined fields, so this is the whole body.
    return {"command": {"resume": resume}, "stream_mode": "events", "assistant_id": graph}


def _sse_events(text: str) -> list[tuple[str, str]]:
    events, name = [], None
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:") and name is not None:
            events.append((name, line[len("data:") :].strip()))
    return events


def test_inbox_edit_with_string_numbers_and_booleans_runs_with_typed_args(stack16, reviewer):
    client = sdk_client(stack16.base_url, reviewer)
    thread_id, _ = _paused(client)
    # The inbox keeps untouched fields as they came and sends edited ones as typed text.
    edit = {
        "type": "edit",
        "args": {
            "action": "send_email",
            "args": {
                "to": "cfo@example.com",
                "subject": "Q3 report",
                "copies": "3",
                "urgent": "true",
            },
        },
    }
    response = _inbox_post(
        stack16.base_url, reviewer, f"/threads/{thread_id}/runs/stream", _inbox_resume_body([edit])
    )
    assert response.status_code == 200, response.text
    assert not [e for e in _sse_events(response.text) if e[0] == "error"]
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert row.response_args == {
        "action": "send_email",
        "args": {"to": "cfo@example.com", "subject": "Q3 report", "copies": 3, "urgent": True},
    }
    state = client.threads.get_state(thread_id)
    assert state["values"]["sent"] == {
        "to": "cfo@example.com",
        "subject": "Q3 report",
        "copies": 3,
        "urgent": True,
    }
    assert Thread.objects.get(pk=thread_id).status == "done"


def test_inbox_create_with_every_field_as_text_converts_each_json_type(stack16, reviewer):
    client = sdk_client(stack16.base_url, reviewer)
    thread_id, _ = _paused(client)
    # Everything typed as text, as the inbox's text boxes send it (runs.create form).
    edit = {
        "type": "edit",
        "args": {
            "action": "send_email",
            "args": {
                "to": "a@example.com",
                "subject": "42",
                "copies": " 5 ",
                "urgent": "False",
                "cc": '["b@example.com"]',
                "ratio": "0.5",
                "extra": '{"k": [1, 2]}',
            },
        },
    }
    response = _inbox_post(
        stack16.base_url,
        reviewer,
        f"/threads/{thread_id}/runs",
        {"command": {"resume": [edit]}, "assistant_id": "typed_email"},
    )
    assert response.status_code == 200, response.text
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert row.response_args["args"] == {
        "to": "a@example.com",
        "subject": "42",  # the schema asks for a string: it stays one
        "copies": 5,
        "urgent": False,
        "cc": ["b@example.com"],
        "ratio": 0.5,
        "extra": {"k": [1, 2]},
    }


def test_inbox_edit_that_cannot_convert_is_a_clear_4xx_and_records_nothing(stack16, reviewer):
    client = sdk_client(stack16.base_url, reviewer)
    thread_id, _ = _paused(client)
    edit = {
        "type": "edit",
        "args": {"action": "send_email", "args": {**EMAIL_ARGS, "copies": "three"}},
    }
    response = _inbox_post(
        stack16.base_url, reviewer, f"/threads/{thread_id}/runs/stream", _inbox_resume_body([edit])
    )
    assert response.status_code == 400
    assert "copies" in response.text and "'three' is not of type 'integer'" in response.text
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert row.status == "pending" and row.response_args is None
    assert not AuditEvent.objects.filter(kind="interrupt_answered", thread_id=thread_id).exists()
    # A bool that is not true/false stays an error too; null is not an integer.
    for bad in ({"urgent": "yes"}, {"copies": ""}):
        edit["args"]["args"] = {**EMAIL_ARGS, **bad}
        response = _inbox_post(
            stack16.base_url,
            reviewer,
            f"/threads/{thread_id}/runs/stream",
            _inbox_resume_body([edit]),
        )
        assert response.status_code == 400, bad


def test_typed_clients_stay_strict(stack16, reviewer):
    client = sdk_client(stack16.base_url, reviewer)
    thread_id, values = _paused(client)
    interrupt_id = values["__interrupt__"][0]["id"]
    edit = {"type": "edit", "args": {"action": "send_email", "args": {**EMAIL_ARGS, "copies": "3"}}}
    for resume in (edit, {interrupt_id: edit}):
        with pytest.raises(httpx.HTTPStatusError) as exc:
            client.runs.create(thread_id, "typed_email", command={"resume": resume})
        assert exc.value.response.status_code == 400
        assert "'3' is not of type 'integer'" in exc.value.response.text
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "pending"


def test_a_client_marked_lenient_gets_its_strings_converted(stack16, reviewer):
    from langgraph_sdk import get_sync_client

    sdk = get_sync_client(
        url=f"{stack16.base_url}/langgraph",
        api_key=token_for(reviewer),
        headers={"X-HITL-Lenient-Edits": "true"},
    )
    try:
        thread_id, _ = _paused(sdk)
        edit = {
            "type": "edit",
            "args": {"action": "send_email", "args": {**EMAIL_ARGS, "copies": "4"}},
        }
        run = sdk.runs.create(thread_id, "typed_email", command={"resume": edit})
        sdk.runs.join(thread_id, run["run_id"])
        assert sdk.threads.get_state(thread_id)["values"]["sent"]["copies"] == 4
    finally:
        sdk.close()


# --- key order ------------------------------------------------------------------------


def _order(mapping: dict) -> list[str]:
    return [k for k in mapping if k in EMAIL_ARGS]


def test_args_keep_the_graphs_key_order_in_storage_every_api_and_the_page(
    stack16, reviewer, client
):
    expected = list(EMAIL_ARGS)  # to, subject, copies, urgent: not jsonb's order
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id, values = _paused(sdk)
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert list(row.args) == expected
    assert list(row.raw_value["action_request"]["args"]) == expected
    assert list(row.args_schema["properties"])[:4] == expected
    # langgraph_sdk: the wait answer, the thread (what the Agent Inbox reads), the state.
    assert list(values["__interrupt__"][0]["value"]["action_request"]["args"]) == expected
    thread = sdk.threads.get(thread_id)
    (items,) = thread["interrupts"].values()
    assert list(items[0]["value"]["action_request"]["args"]) == expected
    searched = sdk.threads.search(status="interrupted")
    (found,) = [t for t in searched if t["thread_id"] == thread_id]
    (items,) = found["interrupts"].values()
    assert list(items[0]["value"]["action_request"]["args"]) == expected
    state = sdk.threads.get_state(thread_id)
    assert list(state["interrupts"][0]["value"]["action_request"]["args"]) == expected
    # /api/v1 (raw JSON text, so no client-side reordering can hide anything).
    headers = {"Authorization": f"Bearer {token_for(reviewer)}"}
    detail = httpx.get(f"{stack16.base_url}/api/v1/interrupts/{row.pk}", headers=headers)
    assert detail.status_code == 200
    assert list(json.loads(detail.text)["action_request"]["args"]) == expected
    assert list(json.loads(detail.text)["value"]["action_request"]["args"]) == expected
    # The reviewer page lists the fields in the graph's order.
    client.force_login(reviewer)
    html = client.get(f"/threads/{thread_id}/").content.decode()
    positions = [html.index(f'<span class="key">{key}</span>') for key in expected]
    assert positions == sorted(positions)
    # An edit keeps the order the client sent it in, through storage and the graph.
    edited = {"urgent": True, "copies": 3, "subject": "Q4", "to": "x@example.com"}
    run = sdk.runs.create(
        thread_id,
        "typed_email",
        command={"resume": {"type": "edit", "args": {"action": "send_email", "args": edited}}},
    )
    sdk.runs.join(thread_id, run["run_id"])
    row.refresh_from_db()
    assert list(row.response_args["args"]) == list(edited)
    assert list(sdk.threads.get_state(thread_id)["values"]["sent"]) == list(edited)
    # The audit trail on the page shows what was proposed in the graph's order too.
    html = client.get(f"/threads/{thread_id}/").content.decode()
    trail = html[html.index("Proposed") :]
    positions = [trail.index(f"&quot;{key}&quot;:") for key in expected]
    assert positions == sorted(positions)


# --- stream parity --------------------------------------------------------------------


def test_a_paused_runs_values_stream_ends_with_its_interrupt(stack16, reviewer):
    sdk = sdk_client(stack16.base_url, reviewer)
    thread = sdk.threads.create()
    parts = list(
        sdk.runs.stream(
            thread["thread_id"],
            "typed_email",
            input={"request": "q3"},
            stream_mode=["values", "updates", "custom"],
        )
    )
    values = [p.data for p in parts if p.event == "values"]
    last = values[-1]
    assert parts[-1].event == "values"  # the interrupt chunk is the stream's last word
    assert last["request"] == "q3"
    (item,) = last["__interrupt__"]
    row = HumanInterrupt.objects.get(thread_id=thread["thread_id"])
    assert item["id"] == row.interrupt_id
    assert list(item["value"]["action_request"]["args"]) == list(EMAIL_ARGS)
    assert all("__interrupt__" not in v for v in values[:-1])
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates[-1]["__interrupt__"][0]["id"] == row.interrupt_id
    custom = [p.data for p in parts if p.event == "custom"]
    assert custom == [{"progress": "drafted", "request": "q3"}]
    # A run that finishes ends on plain values, no interrupt.
    resumed = list(
        sdk.runs.stream(
            thread["thread_id"],
            "typed_email",
            command={"resume": {"type": "accept", "args": None}},
            stream_mode="values",
        )
    )
    assert resumed[-1].event == "values"
    assert "__interrupt__" not in resumed[-1].data
    assert resumed[-1].data["sent"] == EMAIL_ARGS


def test_join_stream_of_a_paused_run_ends_with_its_interrupt(stack16, reviewer):
    sdk = sdk_client(stack16.base_url, reviewer)
    thread = sdk.threads.create()
    run = sdk.runs.create(thread["thread_id"], "typed_email", input={"request": "q1"})
    parts = list(sdk.runs.join_stream(thread["thread_id"], run["run_id"], stream_mode="values"))
    assert parts[-1].event == "values"
    assert parts[-1].data["__interrupt__"][0]["value"]["action_request"]["action"] == "send_email"


# --- LangGraph Server verbs -----------------------------------------------------------


def _ids_by_action(values: dict) -> dict[str, str]:
    return {i["value"]["action_request"]["action"]: i["id"] for i in values["__interrupt__"]}


def test_a_partial_resume_answers_some_interrupts_and_leaves_the_rest_answerable(
    stack16, reviewer, outsider
):
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id, values = _paused(sdk, "two_approvals")
    ids = _ids_by_action(values)
    assert set(ids) == {"approve_left", "approve_right"}
    accept = {"type": "accept", "args": None}
    # Someone outside the thread cannot answer even a part.
    with pytest.raises(httpx.HTTPStatusError) as exc:
        sdk_client(stack16.base_url, outsider).runs.create(
            thread_id, "two_approvals", command={"resume": {ids["approve_left"]: accept}}
        )
    assert exc.value.response.status_code == 404
    partial = sdk.runs.wait(
        thread_id, "two_approvals", command={"resume": {ids["approve_left"]: accept}}
    )
    assert [i["id"] for i in partial["__interrupt__"]] == [ids["approve_right"]]
    thread = sdk.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    pending = [i["id"] for items in thread["interrupts"].values() for i in items]
    assert pending == [ids["approve_right"]]
    rows = {r.action: r for r in HumanInterrupt.objects.filter(thread_id=thread_id)}
    assert rows["approve_left"].status == "resolved"
    assert rows["approve_right"].status == "pending"
    # Answering the left one again is a conflict naming who answered it.
    with pytest.raises(httpx.HTTPStatusError) as exc:
        sdk.runs.create(
            thread_id, "two_approvals", command={"resume": {ids["approve_left"]: accept}}
        )
    assert exc.value.response.status_code == 409
    assert "rita" in exc.value.response.text
    # The rest, answered later (here as a stream), resumes the graph with both answers.
    parts = list(
        sdk.runs.stream(
            thread_id,
            "two_approvals",
            command={"resume": {ids["approve_right"]: {"type": "response", "args": "later"}}},
            stream_mode="values",
        )
    )
    assert sorted(parts[-1].data["answers"]) == ["left:accept", "right:response"]
    assert Thread.objects.get(pk=thread_id).status == "done"


def _done(sdk, graph: str = "typed_email") -> str:
    thread_id, values = _paused(sdk, graph)
    sdk.runs.wait(thread_id, graph, command={"resume": {"type": "accept", "args": None}})
    assert sdk.threads.get(thread_id)["status"] == "idle"
    return thread_id


def test_threads_delete_removes_the_thread_and_its_checkpoints_and_is_audited(
    stack16, reviewer, second_reviewer, outsider
):
    owner = sdk_client(stack16.base_url, reviewer)
    thread_id = _done(owner)
    assert owner.threads.get_history(thread_id)
    for who, status in ((outsider, 404), (second_reviewer, 403)):
        with pytest.raises(httpx.HTTPStatusError) as exc:
            sdk_client(stack16.base_url, who).threads.delete(thread_id)
        assert exc.value.response.status_code == status
    assert Thread.objects.filter(pk=thread_id).exists()
    owner.threads.delete(thread_id)
    assert not Thread.objects.filter(pk=thread_id).exists()
    with pytest.raises(httpx.HTTPStatusError) as exc:
        owner.threads.get(thread_id)
    assert exc.value.response.status_code == 404
    event = AuditEvent.objects.get(kind="thread.deleted")
    assert event.data["thread_id"] == thread_id and event.actor == reviewer
    from hitl.core.runs.graphs import checkpointer

    assert list(checkpointer().list({"configurable": {"thread_id": thread_id}})) == []


def test_threads_copy_carries_state_and_history_to_a_new_thread(stack16, reviewer, outsider):
    owner = sdk_client(stack16.base_url, reviewer)
    thread_id = _done(owner)
    with pytest.raises(httpx.HTTPStatusError) as exc:
        sdk_client(stack16.base_url, outsider).threads.copy(thread_id)
    assert exc.value.response.status_code == 404
    copy = owner.threads.copy(thread_id)
    assert copy["thread_id"] != thread_id
    assert (
        owner.threads.get_state(copy["thread_id"])["values"]
        == (owner.threads.get_state(thread_id)["values"])
    )
    assert len(owner.threads.get_history(copy["thread_id"], limit=50)) == len(
        owner.threads.get_history(thread_id, limit=50)
    )
    assert AuditEvent.objects.get(kind="thread.copied").data["source_thread_id"] == thread_id
    # A paused thread's copy is paused too (as LangGraph Server copies it), with rows of
    # its own: answering the copy resumes the copy, and leaves the source waiting.
    paused, _ = _paused(owner)
    copied = owner.threads.copy(paused)
    assert copied["status"] == "interrupted" and copied["thread_id"] != paused
    source_row = HumanInterrupt.objects.get(thread_id=paused)
    copy_row = HumanInterrupt.objects.get(thread_id=copied["thread_id"])
    assert copy_row.pk != source_row.pk and copy_row.interrupt_id == source_row.interrupt_id
    assert copy_row.args == source_row.args and copy_row.status == "pending"
    created = AuditEvent.objects.get(kind="interrupt.created", interrupt_id=copy_row.pk)
    assert created.data["copied"] is True and str(created.thread_id) == copied["thread_id"]
    done = owner.runs.wait(
        copied["thread_id"], "typed_email", command={"resume": {"type": "accept"}}
    )
    assert done["sent"]["to"] == "ops@example.com"
    source_row.refresh_from_db()
    assert source_row.status == "pending"
    assert owner.threads.get(paused)["status"] == "interrupted"


def test_update_state_as_node_writes_a_checkpoint_and_is_audited(
    stack16, reviewer, second_reviewer
):
    owner = sdk_client(stack16.base_url, reviewer)
    thread_id = _done(owner)
    result = owner.threads.update_state(thread_id, {"request": "edited"}, as_node="send")
    assert result["checkpoint"]["checkpoint_id"]
    state = owner.threads.get_state(thread_id)
    assert state["values"]["request"] == "edited"
    assert state["checkpoint"]["checkpoint_id"] == result["checkpoint"]["checkpoint_id"]
    assert state["metadata"]["source"] == "update"
    event = AuditEvent.objects.get(kind="thread.state_updated")
    assert event.data["as_node"] == "send" and event.actor == reviewer
    # Bad input: an unknown node, a reviewer who is not the requester.
    with pytest.raises(httpx.HTTPStatusError) as exc:
        owner.threads.update_state(thread_id, {"request": "x"}, as_node="nope")
    assert exc.value.response.status_code == 400 and "as_node" in exc.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as exc:
        sdk_client(stack16.base_url, second_reviewer).threads.update_state(
            thread_id, {"request": "x"}, as_node="send"
        )
    assert exc.value.response.status_code in (403, 404)
    assert owner.threads.get_state(thread_id)["values"]["request"] == "edited"


def test_thread_join_stream_and_run_streams_name_their_location(stack16, reviewer):
    owner = sdk_client(stack16.base_url, reviewer)
    thread = owner.threads.create()
    run = owner.runs.create(thread["thread_id"], "typed_email", input={"request": "q9"})
    parts = list(owner.threads.join_stream(thread["thread_id"], stream_mode="values"))
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    assert parts[-1].data["__interrupt__"][0]["value"]["action_request"]["action"] == "send_email"
    # runs.stream answers with the Location langgraph_sdk reconnects to.
    with httpx.stream(
        "POST",
        f"{stack16.base_url}/langgraph/threads/{thread['thread_id']}/runs/stream",
        json={"assistant_id": "typed_email", "command": {"resume": {"type": "ignore"}}},
        headers={"x-api-key": token_for(reviewer)},
        timeout=60,
    ) as response:
        body = response.read().decode()
        location = response.headers["location"]
    run_id = _sse_events(body)[0][1]
    # As LangGraph Server: a path under the API root (the SDKs join it to their base URL).
    run_path = f"/threads/{thread['thread_id']}/runs/{json.loads(run_id)['run_id']}"
    assert location == f"{run_path}/stream"


def test_a_run_from_an_earlier_checkpoint_forks_the_thread_from_that_step(stack16, reviewer):
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = _done(sdk)
    history = sdk.threads.get_history(thread_id, limit=50)
    (before_ask,) = [h for h in history if h["next"] == ["ask"]]
    checkpoint_id = before_ask["checkpoint"]["checkpoint_id"]
    # Bad input first: an unknown checkpoint, a checkpoint with a resume.
    with pytest.raises(httpx.HTTPStatusError) as exc:
        sdk.runs.create(thread_id, "typed_email", input={}, checkpoint_id="1f0-nope")
    assert exc.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as exc:
        sdk.runs.create(
            thread_id,
            "typed_email",
            command={"resume": {"type": "accept"}},
            checkpoint_id=checkpoint_id,
        )
    assert exc.value.response.status_code == 400
    runs_before = Thread.objects.get(pk=thread_id).runs.count()
    assert runs_before == 2
    # From the step before "ask": the graph asks again, a new interrupt to answer.
    values = sdk.runs.wait(
        thread_id, "typed_email", input=None, checkpoint={"checkpoint_id": checkpoint_id}
    )
    assert values["__interrupt__"][0]["value"]["action_request"]["action"] == "send_email"
    state = sdk.threads.get_state(thread_id)
    assert state["next"] == ["ask"]
    # LangGraph's fork: a copy of the chosen checkpoint (same parent), then the new steps.
    fork = sdk.threads.get_state(thread_id, state["parent_checkpoint"]["checkpoint_id"])
    assert fork["metadata"]["source"] == "fork" and fork["next"] == ["ask"]
    assert fork["parent_checkpoint"] == before_ask["parent_checkpoint"]
    run = Thread.objects.get(pk=thread_id).runs.order_by("-created_at").first()
    assert run.checkpoint_id == checkpoint_id
    edit = {"type": "edit", "args": {"action": "send_email", "args": {**EMAIL_ARGS, "copies": 7}}}
    final = sdk.runs.wait(thread_id, "typed_email", command={"resume": edit})
    assert final["sent"]["copies"] == 7
    # The original branch is still in the history.
    assert len(sdk.threads.get_history(thread_id, limit=100)) > len(history)
