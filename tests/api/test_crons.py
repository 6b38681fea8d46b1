"""Crons through langgraph_sdk's `client.crons`: created, read, searched, counted,
changed and deleted; what a cron's run cannot honour is a clear 400."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from hitl.core.models import AuditEvent, Cron, Run, Thread
from hitl.core.resources.crons import crons_fire
from tests.api.conftest import sdk_client
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def _status(call) -> int:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    return caught.value.response.status_code


def test_crons_are_created_searched_counted_changed_and_deleted(parity, requester, reviewer):
    client = sdk_client(parity.base_url, requester)
    made = client.crons.create(
        "echo_config", schedule="*/5 * * * *", input={"request": "hourly"}, metadata={"k": 1}
    )
    assert made["schedule"] == "*/5 * * * *" and made["thread_id"] is None
    next_run = datetime.fromisoformat(made["next_run_date"])
    assert next_run > datetime.now(UTC) and next_run.minute % 5 == 0
    thread = client.threads.create()
    on_thread = client.crons.create_for_thread(
        thread["thread_id"], "echo_config", schedule="0 9 * * 1", timezone="Europe/Berlin"
    )
    assert on_thread["thread_id"] == thread["thread_id"]
    assert datetime.fromisoformat(on_thread["next_run_date"]).astimezone(UTC).hour in (7, 8)

    assert client.crons.count() == 2
    assert client.crons.count(thread_id=thread["thread_id"]) == 1
    assert [c["cron_id"] for c in client.crons.search(metadata={"k": 1})] == [made["cron_id"]]
    assert len(client.crons.search(limit=1)) == 1
    picked = client.crons.search(select=["cron_id", "schedule"])
    assert all(set(c) == {"cron_id", "schedule"} for c in picked)

    changed = client.crons.update(made["cron_id"], schedule="0 0 1 1 *", enabled=False)
    assert (changed["schedule"], changed["enabled"]) == ("0 0 1 1 *", False)
    # Stored under its assistant's id: a graph name is a 422, as LangGraph Server answers.
    assert _status(lambda: client.crons.count(assistant_id="echo_config")) == 422
    # Another user sees none of them.
    other = sdk_client(parity.base_url, reviewer)
    assert other.crons.count() == 0
    assert _status(lambda: other.crons.delete(made["cron_id"])) == 404

    client.crons.delete(made["cron_id"])
    assert client.crons.count() == 1
    kinds = set(AuditEvent.objects.values_list("kind", flat=True))
    assert {"cron.created", "cron.deleted"} <= kinds


def test_a_due_cron_starts_a_run_that_the_worker_executes(parity, requester):
    client = sdk_client(parity.base_url, requester)
    assistant = client.assistants.create("echo_config", context={"tenant": "cron"})
    made = client.crons.create(
        assistant["assistant_id"],
        schedule="* * * * *",
        input={"request": "r"},
        config={"tags": ["from-cron"]},
    )
    later = datetime.now(UTC) + timedelta(minutes=2)
    assert crons_fire(now=later) == 1
    assert crons_fire(now=later) == 0  # that tick is done; the next is after `later`
    run = Run.objects.get(metadata__cron_id=made["cron_id"])
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "success", 30, 0.1, "the cron's run")
    values = client.threads.get_state(str(run.thread_id))["values"]
    assert values["seen"]["context"] == {"tenant": "cron"}  # the assistant's
    assert values["seen"]["tags"] == ["from-cron"]  # the cron's own config on top
    assert Thread.objects.get(pk=run.thread_id).metadata["cron_id"] == made["cron_id"]
    assert Cron.objects.get(pk=made["cron_id"]).next_run_date > later
    fired = AuditEvent.objects.get(kind="cron.fired")
    assert (fired.run_id, fired.actor_id) == (run.pk, requester.pk)


def test_what_a_cron_cannot_do_is_a_clear_400(parity, requester, reviewer):
    client = sdk_client(parity.base_url, requester)
    bad = [
        {"schedule": "every day"},
        {"schedule": "* * * * *", "config": {"configurable": {"thread_id": "x"}}},
        {"schedule": "* * * * *", "context": {"hitl_files": 1}},
        {"schedule": "* * * * *", "interrupt_before": ["echo"]},
        {"schedule": "* * * * *", "on_run_completed": "delete"},
        {"schedule": "* * * * *", "multitask_strategy": "enqueue"},
        {"schedule": "* * * * *", "timezone": "Mars/Olympus"},
        {"schedule": "* * * * *", "input": ["not", "an", "object"]},
    ]
    for fields in bad:
        assert _status(lambda f=fields: client.crons.create("echo_config", **f)) == 400, fields
    assert _status(lambda: client.crons.create("no_such", schedule="* * * * *")) == 404
    theirs = sdk_client(parity.base_url, reviewer).threads.create()
    assert (
        _status(
            lambda: client.crons.create_for_thread(
                theirs["thread_id"], "echo_config", schedule="* * * * *"
            )
        )
        == 404
    )
    assert not Cron.objects.exists()
