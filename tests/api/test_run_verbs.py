"""LangGraph Server's runs.delete and runs.cancel_many, and threads.join_stream's default
"run_modes", through the real langgraph_sdk against daphne and a Celery worker."""

from __future__ import annotations

import httpx
import pytest

from hitl.core.models import AuditEvent, Run
from tests.api.client_graphs import nested_graph
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def _status(exc_info) -> int:
    return exc_info.value.response.status_code


def test_a_finished_run_is_deleted_but_not_one_waiting_on_reviewers(
    stack16,  # noqa: F811
    reviewer,
    second_reviewer,
    outsider,
):
    owner = sdk_client(stack16.base_url, reviewer)
    thread_id = owner.threads.create()["thread_id"]
    owner.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    paused = owner.runs.list(thread_id)[0]["run_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        owner.runs.delete(thread_id, paused)
    assert _status(refused) == 409
    owner.runs.wait(thread_id, "typed_email", command={"resume": {"type": "accept"}})
    assert len(owner.runs.list(thread_id)) == 2

    # Someone who sees the thread but did not start it may not; a stranger sees nothing.
    for user, status in ((second_reviewer, 403), (outsider, 404)):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            sdk_client(stack16.base_url, user).runs.delete(thread_id, paused)
        assert _status(refused) == status
    owner.runs.delete(thread_id, paused)
    assert [r["run_id"] for r in owner.runs.list(thread_id)] != [paused]
    assert len(owner.runs.list(thread_id)) == 1
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.RUN_DELETED)
    assert event.data["run_id"] == paused and event.actor == reviewer
    with pytest.raises(httpx.HTTPStatusError) as gone:
        owner.runs.get(thread_id, paused)
    assert _status(gone) == 404


def test_cancel_many_cancels_by_ids_or_by_status_and_only_what_the_user_may(
    stack16,  # noqa: F811
    reviewer,
    second_reviewer,
):
    owner = sdk_client(stack16.base_url, reviewer)
    other = sdk_client(stack16.base_url, second_reviewer)

    def start(client) -> tuple[str, str]:
        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, "ticker", input={"pause": 0.2})
        return thread_id, run["run_id"]

    by_id, by_status, theirs = start(owner), start(owner), start(other)
    owner.runs.cancel_many(thread_id=by_id[0], run_ids=[by_id[1]])
    assert Run.objects.get(pk=by_id[1]).status == Run.Status.CANCELLED
    assert Run.objects.get(pk=by_status[1]).status != Run.Status.CANCELLED

    owner.runs.cancel_many(status="all")
    assert Run.objects.get(pk=by_status[1]).status == Run.Status.CANCELLED
    # Another user's thread is not the owner's to cancel: it runs to its end.
    wait_for(
        lambda: Run.objects.get(pk=theirs[1]).status == Run.Status.SUCCESS, 60, 0.1, "their run"
    )

    base = f"{stack16.base_url}/langgraph/runs/cancel"
    headers = {"x-api-key": token_for(reviewer)}
    for body, params, status in (
        ({}, {}, 400),
        ({"status": "all", "thread_id": by_id[0], "run_ids": [by_id[1]]}, {}, 400),
        ({"thread_id": by_id[0], "run_ids": [theirs[1]]}, {}, 404),
        ({"thread_id": theirs[0], "run_ids": [theirs[1]]}, {}, 404),
        ({"status": "all"}, {"action": "rollback"}, 400),
        ({"status": "bogus"}, {}, 422),
    ):
        response = httpx.post(base, json=body, params=params, headers=headers, timeout=30)
        assert response.status_code == status, (body, response.text)
        assert response.json()["detail"]


def test_thread_join_stream_defaults_to_the_modes_its_run_started_with(stack16, reviewer):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    list(
        sdk.runs.stream(
            thread_id, "nested", input={"request": "q3"}, stream_mode=["updates", "debug"]
        )
    )
    # langgraph_sdk sends stream_mode=run_modes unless told otherwise.
    parts = list(sdk.threads.join_stream(thread_id))
    assert parts[0].event == "metadata"
    assert "values" not in [p.event for p in parts]  # the run was not started with it
    parts = list(sdk.threads.join_stream(thread_id, stream_mode=["run_modes", "values"]))
    assert parts[-1].event == "values" and "__interrupt__" in parts[-1].data
    for unsupported in ("lifecycle", "state_update"):
        response = httpx.get(
            f"{stack16.base_url}/langgraph/threads/{thread_id}/stream",
            params={"stream_mode": unsupported},
            headers={"x-api-key": token_for(reviewer)},
        )
        assert response.status_code == 422, response.text


def test_a_batch_starts_stateless_runs_all_or_none(stack16, reviewer):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    runs = sdk.runs.create_batch(
        [
            {"assistant_id": "typed_email", "input": {"request": "q3"}},
            {"assistant_id": "nested", "input": {"request": "q4"}},
        ]
    )
    assert len(runs) == 2 and len({r["thread_id"] for r in runs}) == 2
    for run in runs:
        assert sdk.runs.join(run["thread_id"], run["run_id"])["__interrupt__"]
    before = Run.objects.count()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        sdk.runs.create_batch(
            [{"assistant_id": "nested", "input": {}}, {"assistant_id": "no-such-graph"}]
        )
    assert _status(refused) == 404 and Run.objects.count() == before
    with pytest.raises(httpx.HTTPStatusError) as refused:
        sdk.runs.create_batch([])
    assert _status(refused) == 400


def test_subgraphs_are_listed_with_their_schemas(stack16, reviewer):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    subgraphs = sdk.assistants.get_subgraphs("nested")
    assert list(subgraphs) == ["review"]
    assert set(subgraphs["review"]["input_schema"]["properties"]) >= {"request", "notes"}
    assert sdk.assistants.get_subgraphs("nested", namespace="review") == subgraphs
    # recurse lists nested subgraphs too, as LangGraph's get_subgraphs(recurse=True).
    expected = [name for name, _ in nested_graph.get_subgraphs(recurse=True)]
    assert list(sdk.assistants.get_subgraphs("nested", recurse=True)) == expected
    assert sdk.assistants.get_subgraphs("typed_email") == {}
