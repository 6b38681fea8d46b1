"""Assistants through langgraph_sdk: stored, versioned variants of registered graphs,
against a real daphne server and a real Celery worker."""

from __future__ import annotations

from importlib.metadata import version

import httpx
import pytest

from hitl.core.models import Assistant, AuditEvent, Run
from hitl.core.registry import registry
from tests.api.conftest import sdk_client

pytestmark = pytest.mark.postgres

SDK_VERSION = version("langgraph-sdk")


def _status(call) -> int:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    return caught.value.response.status_code


def test_an_assistant_is_created_versioned_and_set_back(parity, requester):
    client = sdk_client(parity.base_url, requester)
    made = client.assistants.create(
        "echo_config",
        config={"configurable": {"model": "small"}, "recursion_limit": 9},
        context={"tenant": "acme"},
        metadata={"team": "ops"},
        name="Echo for ops",
        description="echoes",
    )
    assert (made["graph_id"], made["version"], made["name"]) == ("echo_config", 1, "Echo for ops")
    assert made["context"] == {"tenant": "acme"}
    assert client.assistants.get(made["assistant_id"]) == made

    updated = client.assistants.update(
        made["assistant_id"], config={"configurable": {"model": "large"}}, metadata={"tier": 2}
    )
    assert updated["version"] == 2
    assert updated["config"] == {"configurable": {"model": "large"}}
    assert updated["metadata"] == {"team": "ops", "tier": 2}  # merged, as LangGraph does
    assert updated["context"] == {"tenant": "acme"}  # not given: kept

    versions = client.assistants.get_versions(made["assistant_id"])
    assert [v["version"] for v in versions] == [2, 1]
    assert (
        client.assistants.get_versions(made["assistant_id"], metadata={"tier": 2})[0]["version"]
        == 2
    )

    back = client.assistants.set_latest(made["assistant_id"], 1)
    assert (back["version"], back["config"]["configurable"]) == (1, {"model": "small"})
    assert client.assistants.get(made["assistant_id"])["version"] == 1
    # A new update after going back is the next version, not 2 again.
    assert client.assistants.update(made["assistant_id"], name="v3")["version"] == 3
    assert _status(lambda: client.assistants.set_latest(made["assistant_id"], 9)) == 404

    kinds = list(
        AuditEvent.objects.filter(kind__startswith="assistant.").values_list("kind", flat=True)
    )
    assert kinds.count("assistant.updated") == 3 and "assistant.created" in kinds

    client.assistants.delete(made["assistant_id"])
    assert _status(lambda: client.assistants.get(made["assistant_id"])) == 404
    assert not Assistant.objects.exists()


def test_search_and_count_include_the_defaults_and_count_is_not_capped(parity, requester):
    client = sdk_client(parity.base_url, requester)
    defaults = len(registry.names())
    assert client.assistants.count() == defaults
    for n in range(3):
        client.assistants.create("echo_config", name=f"echo {n}", metadata={"n": n})
    # More than one page of search (10): count is not the length of a page.
    assert client.assistants.count() == defaults + 3 > 10
    assert client.assistants.count(graph_id="echo_config") == 4
    assert len(client.assistants.search(graph_id="echo_config", limit=100)) == 4
    assert [a["name"] for a in client.assistants.search(metadata={"n": 1})] == ["echo 1"]
    assert client.assistants.count(name="echo ") == 3
    newest = client.assistants.search(
        graph_id="echo_config", sort_by="created_at", sort_order="desc", limit=1
    )
    assert newest[0]["name"] == "echo 2"
    picked = client.assistants.search(graph_id="echo_config", select=["assistant_id", "name"])
    assert all(set(a) == {"assistant_id", "name"} for a in picked)
    assert _status(lambda: client.assistants.count(graph_id="nope")) == 404


def test_a_run_on_an_assistant_gets_its_config_and_context(parity, requester):
    client = sdk_client(parity.base_url, requester)
    made = client.assistants.create(
        "echo_config",
        config={"configurable": {"model": "small"}, "recursion_limit": 9, "tags": ["t1"]},
        context={"tenant": "acme"},
    )
    thread = client.threads.create()
    out = client.runs.wait(thread["thread_id"], made["assistant_id"], input={"request": "hi"})
    # As LangGraph Server, the request's user-agent header joins configurable.
    assert out["seen"] == {
        "configurable": {"model": "small", "user-agent": f"langgraph-sdk-py/{SDK_VERSION}"},
        "recursion_limit": 9,
        "tags": ["t1"],
        "context": {"tenant": "acme"},
    }
    run = Run.objects.get(thread_id=thread["thread_id"])
    assert (run.assistant_id, run.assistant_version) == (made["assistant_id"], 1)
    (listed,) = client.runs.list(thread["thread_id"])
    assert listed["assistant_id"] == made["assistant_id"]
    assert (
        client.threads.get(thread["thread_id"])["metadata"]["assistant_id"] == made["assistant_id"]
    )
    assert [
        t["thread_id"]
        for t in client.threads.search(metadata={"assistant_id": made["assistant_id"]})
    ] == [thread["thread_id"]]

    # A new version does not change what a run started on the old one saw; new runs get it.
    client.assistants.update(made["assistant_id"], context={"tenant": "globex"})
    again = client.runs.wait(None, made["assistant_id"], input={})
    assert again["seen"]["context"] == {"tenant": "globex"}

    # The default assistant of the same graph has no config of its own.
    plain = client.runs.wait(None, "echo_config", input={})
    assert plain["seen"]["configurable"] == {"user-agent": f"langgraph-sdk-py/{SDK_VERSION}"}
    assert plain["seen"]["context"] is None


def test_only_its_creator_or_the_permission_changes_an_assistant(parity, requester, reviewer):
    from django.contrib.auth.models import Permission

    mine = sdk_client(parity.base_url, requester).assistants.create("echo_config", name="mine")
    other = sdk_client(parity.base_url, reviewer)
    assert other.assistants.get(mine["assistant_id"])["name"] == "mine"  # visible to all
    assert _status(lambda: other.assistants.update(mine["assistant_id"], name="x")) == 403
    assert _status(lambda: other.assistants.delete(mine["assistant_id"])) == 403
    assert _status(lambda: other.assistants.set_latest(mine["assistant_id"], 1)) == 403
    assert Assistant.objects.get(pk=mine["assistant_id"]).name == "mine"
    reviewer.user_permissions.add(Permission.objects.get(codename="change_assistant"))
    assert other.assistants.update(mine["assistant_id"], name="x")["name"] == "x"


def test_default_assistants_cannot_be_changed_and_bad_input_is_a_clear_4xx(parity, requester):
    client = sdk_client(parity.base_url, requester)
    default_id = client.assistants.get("approval")["assistant_id"]
    assert _status(lambda: client.assistants.update(default_id, name="x")) == 409
    assert _status(lambda: client.assistants.delete("approval")) == 409
    assert [v["version"] for v in client.assistants.get_versions("approval")] == [1]
    assert _status(lambda: client.assistants.create("no_such_graph")) == 404
    bad_configs = [
        {"configurable": {"thread_id": "t"}},
        {"configurable": {"hitl_files": 1}},
        {"recursion_limit": "many"},
        {"callbacks": []},
    ]
    for config in bad_configs:
        assert _status(lambda c=config: client.assistants.create("echo_config", config=c)) == 400
    assert _status(lambda: client.assistants.create("echo_config", assistant_id="x")) in (400, 422)
    made = client.assistants.create("echo_config", name="once")
    again = lambda: client.assistants.create("echo_config", assistant_id=made["assistant_id"])  # noqa: E731
    assert _status(again) == 409
    same = client.assistants.create(
        "echo_config", assistant_id=made["assistant_id"], if_exists="do_nothing", name="other"
    )
    assert same["name"] == "once"
    assert (
        _status(lambda: client.assistants.delete(made["assistant_id"], delete_threads=True)) == 400
    )
    assert Assistant.objects.count() == 1
