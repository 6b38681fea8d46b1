"""What HITL refuses instead of ignoring, `select`, JSON 404/405 under /langgraph, and
threads.delete of a busy thread, through langgraph_sdk against daphne and a worker."""

from __future__ import annotations

import httpx
import pytest

from hitl.core.models import AuditEvent, Run, Thread
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def _refused(call, *words: str) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        call()
    assert refused.value.response.status_code == 400, refused.value.response.text
    detail = refused.value.response.json()["detail"]
    assert all(w in detail for w in words), detail


def test_parameters_hitl_does_not_support_are_refused_not_ignored(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    _refused(lambda: client.threads.create(ttl=60), "ttl")
    _refused(
        lambda: client.threads.create(
            supersteps=[{"updates": [{"values": {"request": "x"}, "as_node": "ask"}]}]
        ),
        "supersteps",
    )
    _refused(lambda: client.threads.update(thread_id, metadata={}, ttl=60), "ttl")
    _refused(lambda: client.threads.count(values={"request": "x"}), "values")
    _refused(lambda: client.threads.search(values={"request": "x"}), "values")
    _refused(lambda: client.threads.search(extract={"r": "values.request"}), "extract")
    start = {"input": {"request": "q3"}}
    _refused(
        lambda: client.runs.create(thread_id, "typed_email", after_seconds=5, **start), "after"
    )
    _refused(
        lambda: client.runs.create(None, "typed_email", on_completion="delete", **start),
        "on_completion",
    )
    for durability in ("async", "exit"):
        _refused(
            lambda d=durability: client.runs.create(
                thread_id, "typed_email", durability=d, **start
            ),
            "durability",
        )
    assert not Run.objects.filter(thread_id=thread_id).exists()
    # What HITL does anyway is accepted.
    kept = client.runs.wait(
        None, "typed_email", on_completion="keep", durability="sync", after_seconds=0, **start
    )
    assert kept["__interrupt__"]


def test_select_returns_only_the_named_fields(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    found = client.threads.search(select=["thread_id", "status"])
    assert found == [{"thread_id": thread_id, "status": "interrupted"}]
    with_values = client.threads.search(select=["thread_id", "values"])
    assert with_values[0]["values"]["request"] == "q3"
    runs = client.runs.list(thread_id, select=["run_id", "status"])
    assert [set(r) for r in runs] == [{"run_id", "status"}]


def test_unrouted_paths_and_methods_are_json_404_and_405(stack16, reviewer):  # noqa: F811
    headers = {"x-api-key": token_for(reviewer)}
    base = f"{stack16.base_url}/langgraph"
    for method, path, status, detail in (
        ("GET", "/no/such/path", 404, "Not Found"),
        ("POST", "/threads/x/y/z", 404, "Not Found"),
        ("DELETE", "/info", 405, "Method Not Allowed"),
        ("PUT", "/threads/search", 405, "Method Not Allowed"),
    ):
        response = httpx.request(method, f"{base}{path}", headers=headers)
        assert response.status_code == status, (method, path, response.text)
        assert response.headers["content-type"].startswith("application/json")
        assert response.json() == {"detail": detail}


def test_deleting_a_busy_thread_cancels_its_run_and_deletes_it(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "ticker", input={"pause": 0.3})
    wait_for(
        lambda: Run.objects.get(pk=run["run_id"]).status == Run.Status.RUNNING,
        30,
        0.05,
        "the run to start",
    )
    client.threads.delete(thread_id)
    assert not Thread.objects.filter(pk=thread_id).exists()
    cancelled = AuditEvent.objects.get(kind="run.cancelled", data__run_id=run["run_id"])
    assert cancelled.data["reason"] == "thread deleted"
    with pytest.raises(httpx.HTTPStatusError) as gone:
        client.threads.get(thread_id)
    assert gone.value.response.status_code == 404
    # The worker stops it: its checkpoints do not come back.
    wait_for(lambda: not client.threads.search(ids=[thread_id]), 10, 0.2, "nothing left")
