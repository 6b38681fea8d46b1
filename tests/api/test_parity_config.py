"""LangGraph Server parity (issue 29, part A): a run's config and context, and the
resumes chat UIs send, through the real langgraph_sdk against daphne and a worker."""

from __future__ import annotations

import json

import httpx
import pytest

from hitl.core.models import Run
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401

pytestmark = pytest.mark.postgres


def _status(exc_info) -> int:
    return exc_info.value.response.status_code


def test_config_and_context_reach_the_graph_and_are_kept_on_the_run(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    paused = client.runs.wait(
        thread_id,
        "configured",
        input={},
        config={"configurable": {"user_id": "u-42"}, "recursion_limit": 7, "tags": ["chat"]},
    )
    seen = paused["seen"][0]
    assert seen["configurable"]["user_id"] == "u-42"
    assert seen["configurable"]["thread_id"] == thread_id  # HITL's own key, not the client's
    assert seen["recursion_limit"] == 7 and seen["tags"] == ["chat"]
    # LangGraph Server mirrors configurable into the runtime context.
    assert seen["context"] == {"user_id": "u-42"}
    run = Run.objects.get(thread_id=thread_id)
    assert run.config["configurable"]["user_id"] == "u-42" and run.config["recursion_limit"] == 7
    listed = client.runs.get(thread_id, str(run.pk))
    assert listed["kwargs"]["config"]["configurable"] == run.config["configurable"]

    # A resume with context: the graph goes on with it (and mirrors it in configurable).
    done = client.runs.wait(
        thread_id, "configured", command={"resume": {"type": "accept"}}, context={"tier": "gold"}
    )
    assert done["seen"][1]["context"] == {"tier": "gold"}
    assert done["seen"][1]["configurable"]["tier"] == "gold"
    assert done["seen"][1]["recursion_limit"] == 100  # HITL's default for a run without one


def test_a_reviewers_answer_resumes_with_the_config_the_run_paused_with(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "configured", input={}, context={"user_id": "u-7"})
    # A resume that brings no config or context of its own (as the reviewer app's).
    done = client.runs.wait(thread_id, "configured", command={"resume": {"type": "accept"}})
    assert done["seen"][1]["context"] == {"user_id": "u-7"}
    assert done["seen"][1]["configurable"]["user_id"] == "u-7"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"config": {"configurable": {"thread_id": "elsewhere"}}}, "thread_id"),
        ({"config": {"configurable": {"hitl_files": "x"}}}, "hitl_files"),
        ({"config": {"configurable": {"checkpoint_id": "x"}}}, "checkpoint_id"),
        ({"context": {"__pregel_send": 1}}, "__pregel_send"),
        ({"config": {"recursion_limit": 0}}, "recursion_limit"),
        ({"config": {"recursion_limit": "7"}}, "recursion_limit"),
        ({"config": {"tags": "chat"}}, "tags"),
        ({"config": {"configurable": {"a": 1}}, "context": {"b": 2}}, "both"),
    ],
)
def test_reserved_or_malformed_config_is_a_clear_400_and_starts_nothing(
    stack16,  # noqa: F811
    reviewer,
    kwargs,
    words,
):
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(thread_id, "configured", input={}, **kwargs)
    assert _status(refused) == 400
    assert words in refused.value.response.json()["detail"]
    assert not Run.objects.filter(thread_id=thread_id).exists()


def test_recursion_limit_is_honoured(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    # Two steps to the pause: a limit of 1 stops the graph with LangGraph's recursion error.
    parts = list(
        client.runs.stream(thread_id, "configured", input={}, config={"recursion_limit": 1})
    )
    errors = [p.data for p in parts if p.event == "error"]
    assert errors and "Recursion limit" in errors[0]["message"]
    assert Run.objects.get(thread_id=thread_id).status == Run.Status.ERROR


def test_chat_ui_resume_with_empty_input_and_a_command(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    # What Agent Chat UI sends for every decision.
    parts = list(
        client.runs.stream(
            thread_id,
            "typed_email",
            input={},
            command={"resume": [{"type": "accept", "args": None}]},
            stream_mode=["values"],
        )
    )
    assert parts[-1].data["sent"]["to"] == "ops@example.com"
    assert client.threads.get(thread_id)["status"] == "idle"


def test_a_resume_naming_the_head_checkpoint_is_accepted_and_an_older_one_refused(
    stack16,  # noqa: F811
    reviewer,
):
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    history = client.threads.get_history(thread_id)
    head, older = history[0]["checkpoint"], history[-1]["checkpoint"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(
            thread_id, "typed_email", command={"resume": {"type": "accept"}}, checkpoint=older
        )
    assert (
        _status(refused) == 400 and "latest checkpoint" in refused.value.response.json()["detail"]
    )
    # useStream with fetchStateHistory names the head checkpoint in its resume.
    done = client.runs.wait(
        thread_id, "typed_email", command={"resume": {"type": "accept"}}, checkpoint=head
    )
    assert done["sent"]["subject"] == "Q3 report"


def test_x_headers_and_the_user_agent_reach_configurable_but_credentials_do_not(
    stack16,  # noqa: F811
    reviewer,
):
    """As LangGraph Server copies them: every `x-*` header but credentials, and
    `user-agent`, into the run's `configurable` (not its context)."""
    from langgraph_sdk import get_sync_client

    token = token_for(reviewer)
    client = get_sync_client(
        url=f"{stack16.base_url}/langgraph",
        api_key=token,
        headers={"X-Tenant-Region": "eu-1", "X-Service-Key": "secret", "User-Agent": "chat-ui/2"},
    )
    try:
        thread_id = client.threads.create()["thread_id"]
        paused = client.runs.wait(thread_id, "configured", input={})
    finally:
        client.close()
    seen = paused["seen"][0]
    assert seen["configurable"]["x-tenant-region"] == "eu-1"
    assert seen["configurable"]["user-agent"] == "chat-ui/2"
    assert "x-api-key" not in seen["configurable"] and "x-service-key" not in seen["configurable"]
    assert "x-tenant-region" not in (seen["context"] or {})
    run = Run.objects.get(thread_id=thread_id)
    assert run.config["configurable"]["x-tenant-region"] == "eu-1"
    assert token not in json.dumps(run.config)
