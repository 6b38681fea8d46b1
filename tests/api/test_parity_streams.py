"""Joins and reconnects as LangGraph Server answers them (issue 29, part A): the SDK's
default join, a late join with every asked-for mode, `Last-Event-ID: -1`, and SSE ids
on the embedded default too."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from hitl.core.live import eventlog
from hitl.core.models import Run
from tests.api.client_graphs import CHATTER_TICKS, CLIENT_GRAPHS
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401
from tests.conftest import ROOT, wait_for


def _ticks(parts) -> list[int]:
    return [p.data["tick"] for p in parts if p.event == "custom"]


def _assert_end_only(stream, run_id) -> None:
    """A join of a wait's run (it has no modes of its own) gets its metadata, then its end."""
    parts = list(stream)
    assert [p.event for p in parts] == ["metadata", "values"]
    assert parts[0].data["run_id"] == str(run_id) and parts[1].data["ticks"] == CHATTER_TICKS


def _running(run_id: str) -> bool:
    return Run.objects.get(pk=run_id).status == Run.Status.RUNNING


@pytest.mark.postgres
def test_the_sdks_default_join_stream_gets_the_runs_own_modes(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(
        thread_id, "chatter", input={"pause": 0.3}, stream_mode=["custom", "values"]
    )
    # langgraph_sdk sends `stream_mode=` (empty) when none is given: the run's own modes.
    parts = list(client.runs.join_stream(thread_id, run["run_id"]))
    assert parts[0].event == "metadata"
    ticks = _ticks(parts)
    assert ticks and ticks == list(range(ticks[0], CHATTER_TICKS))
    assert parts[-1].event == "values" and parts[-1].data["ticks"] == CHATTER_TICKS
    assert {p.event for p in parts} == {"metadata", "custom", "values"}
    # A JSON array, as LangGraph Server also reads it; an unknown mode is a JSON 422.
    base = f"{stack16.base_url}/langgraph/threads/{thread_id}/runs/{run['run_id']}/stream"
    headers = {"x-api-key": token_for(reviewer)}
    listed = httpx.get(base, params={"stream_mode": '["values"]'}, headers=headers, timeout=30)
    assert listed.status_code == 200 and "event: values" in listed.text
    bogus = httpx.get(base, params={"stream_mode": "bogus"}, headers=headers, timeout=30)
    assert bogus.status_code == 422 and "bogus" in bogus.json()["detail"]


@pytest.mark.postgres
def test_a_late_join_from_the_start_gets_every_part_of_the_runs_modes(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    # An earlier run on the thread: its parts are not this run's.
    client.runs.wait(thread_id, "chatter", input={"pause": 0.01})
    run = client.runs.create(
        thread_id, "chatter", input={"pause": 0.2}, stream_mode=["messages-tuple", "custom"]
    )
    # Nobody listens when the worker starts it: it streams the asked-for modes anyway.
    wait_for(lambda: _running(run["run_id"]), 30, 0.02, "the run to start")
    parts = list(client.runs.join_stream(thread_id, run["run_id"], last_event_id="-1"))
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    assert _ticks(parts) == list(range(CHATTER_TICKS))  # from the first, none twice
    tokens = "".join(p.data[0]["content"] for p in parts if p.event == "messages")
    assert tokens == "one two three four five"
    assert all(p.id for p in parts[1:])  # every part can be resumed from


@pytest.mark.postgres
def test_a_waits_run_keeps_no_stream_of_its_own(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    # The answer of a wait is the run's end: with nobody listening, nothing of the run's
    # stream is built or logged (LangGraph Server keeps none of a run not resumable).
    assert client.runs.wait(thread_id, "chatter", input={"pause": 0.01})["ticks"] == CHATTER_TICKS
    run = Run.objects.get(thread_id=thread_id)
    assert run.status == Run.Status.SUCCESS and run.stream_modes == []
    assert eventlog.read_from(thread_id, "0-0") == []
    # A join after its end still gets its final values, as from any run that has ended.
    _assert_end_only(client.runs.join_stream(thread_id, str(run.pk), last_event_id="-1"), run.pk)


@pytest.mark.postgres
def test_a_join_of_a_waits_run_mid_run_gets_its_end(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    with ThreadPoolExecutor(1) as pool:
        waited = pool.submit(client.runs.wait, thread_id, "chatter", input={"pause": 0.3})
        wait_for(lambda: Run.objects.filter(thread_id=thread_id).exists(), 30, 0.02, "the run")
        run_id = str(Run.objects.get(thread_id=thread_id).pk)
        wait_for(lambda: _running(run_id), 30, 0.02, "the run to start")
        # Found while it runs (runs.list): the join waits for its end, then has its values.
        assert [r["run_id"] for r in client.runs.list(thread_id)] == [run_id]
        _assert_end_only(client.runs.join_stream(thread_id, run_id, last_event_id="-1"), run_id)
        assert waited.result(timeout=60)["ticks"] == CHATTER_TICKS
    assert Run.objects.get(pk=run_id).status == Run.Status.SUCCESS


@pytest.mark.postgres
def test_immediate_joins_all_get_custom_and_messages(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    got = []
    for _ in range(4):
        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(
            thread_id, "chatter", input={"pause": 0.1}, stream_mode=["messages-tuple", "custom"]
        )
        parts = list(client.runs.join_stream(thread_id, run["run_id"], last_event_id="-1"))
        got.append((_ticks(parts), any(p.event == "messages" for p in parts)))
    assert got == [(list(range(CHATTER_TICKS)), True)] * 4


def test_the_embedded_default_sends_sse_ids_and_replays_from_the_start(tmp_path):
    from langgraph_sdk import get_sync_client

    from tests.test_embedded import _serve

    served = _serve(tmp_path, HITL_EXTRA_GRAPHS=CLIENT_GRAPHS, PYTHONPATH=str(ROOT))
    base_url, token, _ = next(served)
    try:
        with get_sync_client(url=f"{base_url}/langgraph", api_key=token) as client:
            thread_id = client.threads.create()["thread_id"]
            parts = list(
                client.runs.stream(
                    thread_id, "chatter", input={"pause": 0.01}, stream_mode=["custom"]
                )
            )
            assert _ticks(parts) == list(range(CHATTER_TICKS))
            assert all(p.id for p in parts[1:]), parts
            run_id = parts[0].data["run_id"]
            again = list(client.runs.join_stream(thread_id, run_id, last_event_id="-1"))
            assert _ticks(again) == list(range(CHATTER_TICKS))
            # From a part in the middle: only what followed it.
            middle = next(p for p in parts if p.event == "custom" and p.data["tick"] == 3)
            rest = list(client.runs.join_stream(thread_id, run_id, last_event_id=middle.id))
            assert _ticks(rest) == list(range(4, CHATTER_TICKS))
    finally:
        next(served, None)
