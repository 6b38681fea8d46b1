"""`client.runs` parameters of langgraph_sdk not shown elsewhere, through the real SDK
against daphne and a Celery worker: a run with no input, the client-side callbacks and
stream format, what HITL refuses, and list/cancel/join details."""

from __future__ import annotations

import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from hitl.core.models import HumanInterrupt, Run
from tests.api.client_graphs import _configured
from tests.api.conftest import refused_status, sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def _langgraph_seen(*inputs) -> list[int]:
    """How many times `before` had run after each input, in LangGraph in-process."""
    graph = _configured.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = []
    for value in inputs:
        graph.invoke(value, config)
        out.append(len(graph.get_state(config).values["seen"]))
    return out


def test_a_run_with_no_input_goes_on_from_the_checkpoint_as_langgraph_does(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(thread_id, "configured", input={})
    old = HumanInterrupt.objects.get(thread_id=thread_id, status="pending")

    # No input on a paused thread: the paused node runs again and asks again; what ran
    # before it does not (LangGraph: input None continues; {} would start over).
    again = client.runs.wait(thread_id, "configured")
    assert _langgraph_seen({}, None) == [1, 1]
    assert len(first["seen"]) == len(again["seen"]) == 1
    assert again["__interrupt__"][0]["value"]["action_request"]["action"] == "go_on"
    assert client.threads.get_state(thread_id)["next"] == ["ask"]
    old.refresh_from_db()
    assert old.status == HumanInterrupt.Status.CANCELLED  # superseded by the new ask
    assert HumanInterrupt.objects.filter(thread_id=thread_id, status="pending").count() == 1

    # An empty input is new input: the graph starts over, in LangGraph as here.
    over = client.runs.wait(thread_id, "configured", input={})
    assert _langgraph_seen({}, {}) == [1, 2] and len(over["seen"]) == 2

    # No input on a graph that ended: nothing runs, the values stay.
    done = client.runs.wait(thread_id, "configured", command={"resume": {"type": "accept"}})
    still = client.runs.wait(thread_id, "configured")
    assert still == done and "__interrupt__" not in still
    assert client.runs.list(thread_id, limit=1)[0]["status"] == "success"


def test_a_run_with_no_input_queued_behind_another_starts_over(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "configured", input={"pause": 0.5})
    queued = client.runs.create(thread_id, "configured", multitask_strategy="enqueue")
    client.runs.join(thread_id, first["run_id"])
    after = client.runs.join(thread_id, queued["run_id"])
    # The checkpoint it would go on from was not written when it was queued: it starts
    # over with an empty input (LangGraph would go on: `before` would have run once).
    assert len(after["seen"]) == 2
    assert after["__interrupt__"][0]["value"]["action_request"]["action"] == "go_on"


def test_on_run_created_and_the_v2_stream_format_work_as_the_sdk_expects(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    created: list[dict] = []
    parts = list(
        client.runs.stream(
            thread_id,
            "typed_email",
            input={"request": "q3"},
            stream_mode=["values", "custom"],
            on_run_created=created.append,
            version="v2",
        )
    )
    (run,) = client.runs.list(thread_id)
    assert created == [{"run_id": run["run_id"], "thread_id": thread_id}]
    assert all({"type", "ns", "data"} <= set(p) for p in parts)
    assert {"values", "custom"} <= {p["type"] for p in parts}
    client.runs.create(
        thread_id,
        "typed_email",
        command={"resume": {"type": "accept"}},
        on_run_created=created.append,
    )
    client.runs.wait(None, "typed_email", input={"request": "q4"}, on_run_created=created.append)
    assert len(created) == 3 and created[2]["thread_id"] != thread_id


def test_langsmith_and_feedback_are_refused_and_resumes_are_always_strict(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    start = {"input": {"request": "q3"}}
    for refused in (
        lambda: next(client.runs.stream(thread_id, "typed_email", feedback_keys=["s"], **start)),
        lambda: client.runs.create(
            thread_id, "typed_email", langsmith_tracing={"project_name": "p"}, **start
        ),
        lambda: client.runs.wait(
            thread_id, "typed_email", langsmith_tracing={"project_name": "p"}, **start
        ),
    ):
        assert refused_status(refused) == 400
    assert not Run.objects.filter(thread_id=thread_id).exists()

    client.runs.wait(thread_id, "typed_email", **start)
    resume = {"resume": {"not-waiting": {"type": "accept"}}}
    for strict in (True, False):
        # LangGraph Server ignores an answer to an interrupt that is not waiting unless
        # strict_resume; HITL always refuses it, and records nothing.
        call = lambda s=strict: client.runs.wait(  # noqa: E731
            thread_id, "typed_email", command=resume, strict_resume=s
        )
        assert refused_status(call) == 400
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "pending"
    done = client.runs.wait(
        thread_id, "typed_email", command={"resume": {"type": "accept"}}, strict_resume=True
    )
    assert done["sent"]["to"]


def test_runs_are_listed_paged_cancelled_and_joined(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = str(uuid.uuid4())
    # if_not_exists="create" makes the thread; metadata and stream_resumable are kept.
    first = client.runs.create(
        thread_id,
        "ticker",
        input={"pause": 0.2},
        if_not_exists="create",
        metadata={"source": "sdk"},
        stream_resumable=True,
        checkpoint_during=True,
        durability="sync",
        multitask_strategy="reject",
    )
    assert client.runs.get(thread_id, first["run_id"])["metadata"]["source"] == "sdk"
    wait_for(
        lambda: Run.objects.get(pk=first["run_id"]).status == Run.Status.RUNNING, 30, 0.05, "run"
    )
    cancelled = client.runs.cancel(thread_id, first["run_id"], wait=True)
    assert cancelled["status"] == "interrupted"
    assert Run.objects.get(pk=first["run_id"]).status == Run.Status.CANCELLED
    second = client.runs.create(thread_id, "ticker", input={"pause": 0.01})
    joined = client.runs.join(thread_id, second["run_id"])
    assert joined["ticks"] > 0

    newest, oldest = client.runs.list(thread_id)
    assert (newest["run_id"], oldest["run_id"]) == (second["run_id"], first["run_id"])
    assert [r["run_id"] for r in client.runs.list(thread_id, limit=1, offset=1)] == [
        first["run_id"]
    ]
    assert [r["run_id"] for r in client.runs.list(thread_id, status="success")] == [
        second["run_id"]
    ]
    replay = list(
        client.runs.join_stream(
            thread_id, second["run_id"], stream_mode="values", last_event_id="-1"
        )
    )
    assert replay[0].event == "metadata" and replay[-1].data["ticks"] == joined["ticks"]
    # The thread's join follows its latest run, replayed from the start too.
    followed = list(client.threads.join_stream(thread_id, stream_mode="values", last_event_id="-1"))
    assert followed[0].data["run_id"] == second["run_id"]
    assert followed[-1].data == replay[-1].data


def test_wait_raise_error_follows_the_sdk(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    failing = {"input": {}, "config": {"recursion_limit": 1}}
    with pytest.raises(Exception, match="^GraphRecursionError: Recursion limit"):
        client.runs.wait(None, "configured", **failing)
    out = client.runs.wait(None, "configured", raise_error=False, **failing)
    # As LangGraph Server: the exception's class and message.
    assert out["__error__"]["error"] == "GraphRecursionError"
    assert out["__error__"]["message"].startswith("Recursion limit of 1 reached")
    parts = list(client.runs.stream(None, "configured", stream_mode="values", **failing))
    assert parts[-1].event == "error" and parts[-1].data == out["__error__"]


def test_headers_and_params_of_every_call_reach_the_server(stack16, reviewer, outsider):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "nested", input={"request": "q3"})
    # `params` join the query string: here the state's subgraphs flag.
    (task,) = client.threads.get_state(thread_id, params={"subgraphs": "true"})["tasks"]
    assert task["state"]["next"] == ["approve"]
    # `headers` go with the request: another user's token is that user.
    other = {"x-api-key": token_for(outsider)}
    assert refused_status(lambda: client.threads.get(thread_id, headers=other)) == 404
    # As LangGraph Server, x-* headers (credentials aside) reach a run's configurable.
    seen = client.runs.wait(None, "configured", input={}, headers={"x-tenant": "acme"})
    assert seen["seen"][0]["configurable"]["x-tenant"] == "acme"
