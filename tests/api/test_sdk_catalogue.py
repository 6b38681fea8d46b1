"""The `client.assistants`, `client.store` and `client.crons` parameters of langgraph_sdk
not shown by their own tests, through the real SDK against daphne and a Celery worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission

from agents.graphs.examples import approval_graph
from hitl.core.models import Cron, Run
from hitl.core.resources.crons import crons_fire
from tests.api.conftest import refused_status, sdk_client
from tests.conftest import store_clear, wait_for

pytestmark = pytest.mark.postgres


def test_assistant_reads_take_xray_versions_pages_and_the_object_format(parity, requester):
    client = sdk_client(parity.base_url, requester)
    expected = approval_graph.get_graph(xray=1).to_json()
    for xray in (True, 1):
        drawn = client.assistants.get_graph("approval", xray=xray)
        assert [n["id"] for n in drawn["nodes"]] == [n["id"] for n in expected["nodes"]]
    schemas = client.assistants.get_schemas("approval")
    assert schemas["graph_id"] == "approval"
    assert {"input_schema", "output_schema", "state_schema", "config_schema"} <= set(schemas)

    made = client.assistants.create("echo_config", name="echo", metadata={"team": "ops"})
    moved = client.assistants.update(made["assistant_id"], graph_id="memory", name="moved")
    assert (moved["graph_id"], moved["version"]) == ("memory", 2)
    assert (
        refused_status(lambda: client.assistants.update(made["assistant_id"], graph_id="nope"))
        == 404
    )
    versions = client.assistants.get_versions(made["assistant_id"], limit=1, offset=1)
    assert [v["version"] for v in versions] == [1]

    page = client.assistants.search(response_format="object", limit=1, offset=0)
    assert len(page["assistants"]) == 1 and page["next"] == "1"
    last = client.assistants.search(
        response_format="object", name="moved", metadata={"team": "ops"}, limit=5
    )
    assert [a["assistant_id"] for a in last["assistants"]] == [made["assistant_id"]]
    assert last["next"] is None
    assert client.assistants.count(metadata={"team": "ops"}, name="moved") == 1


def test_store_reads_take_refresh_ttl_offsets_and_suffixes(parity, requester):
    requester.user_permissions.add(Permission.objects.get(codename="use_store"))
    store_clear()
    client = sdk_client(parity.base_url, requester)
    for user in ("ann", "bob", "cy"):
        client.store.put_item(["prefs", user], "theme", {"dark": user != "bob"})
    # Items have no TTL here (a ttl is refused), so refreshing one changes nothing.
    item = client.store.get_item(["prefs", "ann"], "theme", refresh_ttl=True)
    assert item["value"] == {"dark": True}
    everyone = client.store.search_items(["prefs"], limit=10, refresh_ttl=True)["items"]
    assert len(everyone) == 3
    rest = client.store.search_items(["prefs"], limit=10, offset=1)["items"]
    assert [i["namespace"] for i in rest] == [i["namespace"] for i in everyone[1:]]
    assert client.store.list_namespaces(suffix=["bob"])["namespaces"] == [["prefs", "bob"]]
    listed = client.store.list_namespaces(prefix=["prefs"], limit=2, offset=1)["namespaces"]
    assert listed == [["prefs", "bob"], ["prefs", "cy"]]


def test_a_cron_is_changed_with_every_parameter_it_honours(parity, requester):
    client = sdk_client(parity.base_url, requester)
    thread = client.threads.create()["thread_id"]
    made = client.crons.create_for_thread(
        thread,
        "echo_config",
        schedule="0 9 * * *",
        input={"request": "daily"},
        metadata={"k": 1},
        config={"tags": ["cron"]},
        end_time=datetime.now(UTC) + timedelta(days=30),
        enabled=True,
        timezone="UTC",
    )
    end = datetime.now(UTC) + timedelta(days=60)
    changed = client.crons.update(
        made["cron_id"],
        schedule="0 10 * * *",
        end_time=end,
        input={"request": "later"},
        metadata={"k": 2},
        config={"tags": ["cron", "changed"]},
        context={"tenant": "acme"},
        webhook="http://127.0.0.1:9/hook",
        enabled=False,
        timezone="Europe/Paris",
    )
    assert (changed["schedule"], changed["timezone"], changed["enabled"]) == (
        "0 10 * * *",
        "Europe/Paris",
        False,
    )
    assert datetime.fromisoformat(changed["end_time"]) == end.replace(microsecond=end.microsecond)
    assert changed["payload"]["input"] == {"request": "later"}
    assert changed["payload"]["context"] == {"tenant": "acme"}
    assert changed["payload"]["webhook"] == "http://127.0.0.1:9/hook"
    assert changed["metadata"]["k"] == 2
    for refused in (
        {"interrupt_before": ["echo"]},
        {"interrupt_after": "*"},
        {"on_run_completed": "delete"},
        {"stream_mode": ["values"]},
        {"stream_subgraphs": True},
        {"stream_resumable": True},
        {"durability": "exit"},
    ):
        assert refused_status(lambda f=refused: client.crons.update(made["cron_id"], **f)) == 400
    assert Cron.objects.get(pk=made["cron_id"]).schedule == "0 10 * * *"

    other = client.crons.create(
        "echo_config", schedule="0 8 * * *", multitask_strategy="reject", checkpoint_during=True
    )
    found = client.crons.search(
        assistant_id=made["assistant_id"],
        thread_id=thread,
        enabled=False,
        sort_by="next_run_date",
        sort_order="asc",
        offset=0,
    )
    assert [c["cron_id"] for c in found] == [made["cron_id"]]
    assert [c["cron_id"] for c in client.crons.search(enabled=True)] == [other["cron_id"]]
    assert client.crons.count(assistant_id=made["assistant_id"], metadata={"k": 2}) == 1
    assert client.crons.count(thread_id=thread) == 1
    for refused in (
        {"checkpoint_during": False},
        {"stream_mode": "values"},
        {"stream_subgraphs": True},
        {"stream_resumable": True},
        {"durability": "async"},
        {"interrupt_after": ["echo"]},
    ):
        call = lambda f=refused: client.crons.create("echo_config", schedule="* * * * *", **f)  # noqa: E731
        assert refused_status(call) == 400
    assert Cron.objects.count() == 2


def test_a_thread_cron_with_no_input_starts_its_graph_over_at_each_tick(parity, requester):
    store_clear()
    client = sdk_client(parity.base_url, requester)
    thread = client.threads.create()["thread_id"]
    assert client.runs.wait(thread, "memory", input={"user": "cy"})["count"] == 1
    cron = client.crons.create_for_thread(thread, "memory", schedule="* * * * *")
    assert crons_fire(now=datetime.now(UTC) + timedelta(minutes=2)) == 1
    run = Run.objects.get(metadata__cron_id=cron["cron_id"])
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "success", 30, 0.1, "the cron's run")
    # The graph ran again from its start with the thread's state (LangGraph Server's
    # input None would go on from the ended checkpoint and run nothing: count 1).
    assert client.threads.get_state(thread)["values"]["count"] == 2
