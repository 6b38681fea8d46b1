"""Stop: a client that leaves a stream with on_disconnect="cancel" (or a join with
cancel_on_disconnect) cancels the run, as LangGraph Server does; others leave it running."""

from __future__ import annotations

import httpx
import pytest

from hitl.core.models import AuditEvent, Run
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def _leave_after_first_tick(parts) -> str:
    """Read up to the first custom part, then close the connection; the run's id."""
    run_id = ""
    for part in parts:
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event == "custom":
            break
    parts.close()
    return run_id


def _status(run_id: str) -> str:
    return Run.objects.get(pk=run_id).status


def test_on_disconnect_cancel_stops_the_run(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    run_id = _leave_after_first_tick(
        client.runs.stream(
            thread_id, "ticker", input={"pause": 0.3}, stream_mode="custom", on_disconnect="cancel"
        )
    )
    wait_for(lambda: _status(run_id) == Run.Status.CANCELLED, 30, 0.1, "the run to be cancelled")
    assert AuditEvent.objects.filter(kind="run.cancelled", run_id=run_id).exists()
    assert client.threads.get(thread_id)["status"] == "idle"
    # The worker stopped it: it never reaches its end.
    assert client.threads.get_state(thread_id)["values"].get("ticks") is None


def test_join_with_cancel_on_disconnect_stops_the_run(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "ticker", input={"pause": 0.3}, stream_mode="custom")
    run_id = _leave_after_first_tick(
        client.runs.join_stream(thread_id, run["run_id"], cancel_on_disconnect=True)
    )
    assert run_id == run["run_id"]
    wait_for(lambda: _status(run_id) == Run.Status.CANCELLED, 30, 0.1, "the run to be cancelled")


def test_a_client_leaving_without_asking_leaves_the_run_running(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    run_id = _leave_after_first_tick(
        client.runs.stream(thread_id, "ticker", input={"pause": 0.05}, stream_mode="custom")
    )
    wait_for(lambda: _status(run_id) == Run.Status.SUCCESS, 60, 0.1, "the run to finish")


def test_a_wait_whose_client_leaves_with_on_disconnect_cancel_stops_the_run(stack16, reviewer):  # noqa: F811
    # A wait answers with its headers at once (LangGraph Server's shape); langgraph_sdk
    # reconnects to its Location when the body breaks, so the client that leaves is
    # played with httpx: it reads the first bytes and closes the connection.
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    url = f"{stack16.base_url}/langgraph/threads/{thread_id}/runs/wait"
    for leaves, left_as in (("continue", Run.Status.SUCCESS), ("cancel", Run.Status.CANCELLED)):
        body = {"assistant_id": "ticker", "input": {"pause": 0.3}, "on_disconnect": leaves}
        headers = {"x-api-key": token_for(reviewer)}
        with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as response:
            assert response.status_code == 200
            assert next(response.iter_raw()) == b"\n"  # the run is on; the client leaves
        (run,) = Run.objects.filter(thread_id=thread_id).order_by("-created_at")[:1]
        wait_for(lambda r=run, s=left_as: _status(r.pk) == s, 60, 0.1, f"the run {left_as}")
    assert AuditEvent.objects.filter(kind="run.cancelled", run_id=run.pk).exists()
