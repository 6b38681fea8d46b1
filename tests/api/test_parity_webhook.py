"""Run webhooks carry LangGraph Server's body: the run, its times and the thread's values."""

from __future__ import annotations

import pytest

from tests.api.conftest import WEBHOOK_SECRET, sdk_client
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres

LANGGRAPH_FIELDS = {
    "run_id",
    "thread_id",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
    "created_at",
    "updated_at",
    "run_started_at",
    "run_ended_at",
    "webhook_sent_at",
    "values",
}


def test_webhook_bodies_have_langgraph_servers_shape(stack16, reviewer, receiver, settings):  # noqa: F811
    settings.HITL_WEBHOOK_HOSTS = ["127.0.0.1:*"]
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    settings.HITL_WEBHOOK_SECRET = WEBHOOK_SECRET
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(
        thread_id,
        "typed_email",
        input={"request": "q3"},
        webhook=receiver.url,
        config={"configurable": {"user_id": "u-1"}},
    )
    wait_for(lambda: receiver.events() == ["run.interrupted"], what="the pause's webhook")
    paused = receiver.requests[0]["json"]
    assert set(paused) >= LANGGRAPH_FIELDS
    assert paused["run_id"] == run["run_id"] and paused["status"] == "interrupted"
    assert paused["values"] == {"request": "q3"}  # the thread's values at the pause
    assert paused["kwargs"]["input"] == {"request": "q3"}
    # The run's configurable, with the request's user-agent as LangGraph Server adds it.
    assert paused["kwargs"]["config"]["configurable"]["user_id"] == "u-1"
    assert paused["kwargs"]["config"]["configurable"]["user-agent"].startswith("langgraph-sdk")
    assert paused["run_started_at"] <= paused["run_ended_at"] <= paused["webhook_sent_at"]
    assert paused["interrupts"][0]["action_request"]["action"] == "send_email"

    client.runs.wait(
        thread_id, "typed_email", command={"resume": {"type": "accept"}}, webhook=receiver.url
    )
    wait_for(lambda: len(receiver.events()) == 2, what="the end's webhook")
    done = receiver.requests[1]["json"]
    assert set(done) >= LANGGRAPH_FIELDS and done["status"] == "success"
    assert done["values"]["sent"]["to"] == "ops@example.com"
    assert done["kwargs"]["command"]["resume"]
