"""A client that leaves a stream or a join asking to cancel cancels its run every time, on
both layouts: many leaves in a row, at the moments the server is busiest with the stream
(right after its headers, right after its first part)."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.api.conftest import token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import ROOT, wait_for

LEAVES = 20
TICKER = {"pause": 0.3}  # 24 ticks: the run outlasts every leave by seconds


def _leave_after_metadata(parts) -> str:
    """Read the first part (the run's metadata), then close the connection; the run's id."""
    first = next(iter(parts))
    parts.close()
    assert first.event == "metadata"
    return first.data["run_id"]


def _leave_after_headers(base_url: str, token: str, method: str, path: str, **kw) -> None:
    with httpx.stream(
        method, f"{base_url}/langgraph{path}", headers={"x-api-key": token}, timeout=30, **kw
    ) as response:
        assert response.status_code == 200  # the stream is on; the client leaves


def _leave_many_times(base_url: str, token: str) -> list[tuple[str, str, str]]:
    """Leave streams and joins with cancel, LEAVES times each way; each (how, thread, run)."""
    client = get_sync_client(url=f"{base_url}/langgraph", api_key=token)
    left = []
    for _ in range(LEAVES):
        thread_id = client.threads.create()["thread_id"]
        stream = client.runs.stream(
            thread_id, "ticker", input=TICKER, stream_mode="custom", on_disconnect="cancel"
        )
        left.append(("stream, after its metadata", thread_id, _leave_after_metadata(stream)))

        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, "ticker", input=TICKER, stream_mode="custom")
        joined = client.runs.join_stream(thread_id, run["run_id"], cancel_on_disconnect=True)
        assert _leave_after_metadata(joined) == run["run_id"]
        left.append(("join, after its metadata", thread_id, run["run_id"]))

        thread_id = client.threads.create()["thread_id"]
        body = {"assistant_id": "ticker", "input": TICKER, "on_disconnect": "cancel"}
        _leave_after_headers(
            base_url, token, "POST", f"/threads/{thread_id}/runs/stream", json=body
        )
        run_id = client.runs.list(thread_id)[0]["run_id"]
        left.append(("stream, after its headers", thread_id, run_id))

        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, "ticker", input=TICKER, stream_mode="custom")
        path = f"/threads/{thread_id}/runs/{run['run_id']}/stream?cancel_on_disconnect=true"
        _leave_after_headers(base_url, token, "GET", path)
        left.append(("join, after its headers", thread_id, run["run_id"]))
    return left


def _assert_all_cancelled(base_url: str, token: str, left: list[tuple[str, str, str]]) -> None:
    client = get_sync_client(url=f"{base_url}/langgraph", api_key=token)

    def ended(thread_id: str, run_id: str) -> bool:
        return client.runs.get(thread_id, run_id)["status"] not in ("pending", "running")

    for _, thread_id, run_id in left:
        wait_for(lambda t=thread_id, r=run_id: ended(t, r), 60, 0.1, f"run {run_id} to end")
    kept = [how for how, t, r in left if client.runs.get(t, r).get("cancel_reason") != "cancelled"]
    assert kept == [], f"{len(kept)} of {len(left)} runs not cancelled"


@pytest.mark.postgres
def test_every_client_leaving_with_cancel_cancels_its_run_on_production(stack16, reviewer):  # noqa: F811
    token = token_for(reviewer)
    _assert_all_cancelled(stack16.base_url, token, _leave_many_times(stack16.base_url, token))


def test_every_client_leaving_with_cancel_cancels_its_run_on_the_embedded_default(tmp_path):
    from tests.api.client_graphs import CLIENT_GRAPHS
    from tests.test_embedded import _serve

    served = _serve(tmp_path, HITL_EXTRA_GRAPHS=CLIENT_GRAPHS, PYTHONPATH=str(ROOT))
    base_url, token, _ = next(served)
    try:
        _assert_all_cancelled(base_url, token, _leave_many_times(base_url, token))
    finally:
        next(served, None)
