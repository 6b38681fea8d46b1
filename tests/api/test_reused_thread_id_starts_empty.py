"""Deleting a thread deletes what Redis keeps of it: a thread created again under the same
id starts empty (real daphne + a Celery worker, langgraph_sdk and raw SSE)."""

from __future__ import annotations

import uuid

import httpx
import pytest
import redis
from django.conf import settings

from tests.api.conftest import sdk_client, token_for

pytestmark = pytest.mark.postgres

SECRET = "quinn-merger-plan-7731"


def _keys_naming(value: str) -> list[bytes]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    return [k for k in client.scan_iter(match=f"hitl:*{value}*") if b"hitl:" in k]


def test_a_reused_thread_id_replays_none_of_the_first_owners_events(live, requester, outsider):
    thread_id = str(uuid.uuid4())
    first = sdk_client(live.base_url, requester)
    first.threads.create(thread_id=thread_id)
    parts = list(
        first.runs.stream(
            thread_id, "approval", input={"request": SECRET}, stream_mode=["values", "updates"]
        )
    )
    first_run = parts[0].data["run_id"]
    assert any(SECRET in str(p.data) for p in parts)
    assert _keys_naming(thread_id)  # the stream was logged for reconnects

    first.threads.delete(thread_id)
    left = _keys_naming(thread_id) + _keys_naming(first_run)

    second = sdk_client(live.base_url, outsider)
    second.threads.create(thread_id=thread_id)
    run = second.runs.create(thread_id, "approval", input={"request": "oscar's own"})
    second.runs.join(thread_id, run["run_id"])
    response = httpx.get(
        f"{live.base_url}/langgraph/threads/{thread_id}/runs/{run['run_id']}/stream",
        headers={"x-api-key": token_for(outsider), "Last-Event-ID": "0-0#0"},
        timeout=60,
    )

    assert response.status_code == 200
    assert SECRET not in response.text
    assert first_run not in response.text
    assert left == []  # the log, the resumable mark, the run's stream modes
