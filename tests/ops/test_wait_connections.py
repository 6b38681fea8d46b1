"""Waiting clients hold no database connection: many open waits cost one web process no
more than its pool, and every wait still ends with the right answer.

A real daphne with a small pool, langgraph_sdk clients opening `runs.wait`, `runs.stream`
and `runs.create` + `runs.join` at once on runs that stay queued (no worker yet), so every
wait is open at the same time; Postgres's own view of the web process's sessions
(pg_stat_activity, by application_name) is sampled throughout.
"""

from __future__ import annotations

import asyncio
import threading

import httpx
import psycopg
import pytest

from hitl.core.models import ApiToken, Run
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres

POOL = 4
CHECKPOINT_POOL = 2  # the web process's checkpointer pool (state and history reads)
WAITS = 48  # twelve times the pool
APP = "hitl-waits-web"
CHECKPOINT_APP = "hitl-waits-checkpoints"


class SessionPeak:
    """The most sessions of each pool of the web process at once, from pg_stat_activity."""

    def __init__(self, database_url: str):
        self.database_url = database_url
        self.peak = 0
        self.peak_checkpoints = 0
        self.peak_total = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name LIKE 'hitl-waits-%%' "
                    "GROUP BY 1"
                ).fetchall()
                counts = dict(rows)
                self.peak = max(self.peak, counts.get(APP, 0))
                self.peak_checkpoints = max(self.peak_checkpoints, counts.get(CHECKPOINT_APP, 0))
                self.peak_total = max(self.peak_total, sum(counts.values()))
                self.samples += 1
                self._stop.wait(0.02)

    def __enter__(self) -> SessionPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


async def _open_waits(base: str, token: str, thread_ids: list[str], answers: dict) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=f"{base}/langgraph", api_key=token, timeout=120)

    async def wait(thread_id: str) -> None:
        answers[thread_id] = ("wait", await client.runs.wait(thread_id, "approval", input=_in()))

    async def stream(thread_id: str) -> None:
        parts = [
            part
            async for part in client.runs.stream(
                thread_id, "approval", input=_in(), stream_mode="values"
            )
        ]
        answers[thread_id] = ("stream", parts[-1].data if parts else None)

    async def join(thread_id: str) -> None:
        run = await client.runs.create(thread_id, "approval", input=_in())
        answers[thread_id] = ("join", await client.runs.join(thread_id, run["run_id"]))

    kinds = (wait, stream, join)
    try:
        outcomes = await asyncio.gather(
            *(kinds[i % 3](t) for i, t in enumerate(thread_ids)), return_exceptions=True
        )
    finally:
        await client.aclose()
    for thread_id, outcome in zip(thread_ids, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            answers[thread_id] = ("error", f"{type(outcome).__name__}: {outcome}")


def _in() -> dict:
    return {"request": "waits"}


def test_many_open_waits_cost_the_web_process_no_more_than_its_pool(
    web_factory, worker_factory, transactional_db, test_database_url, requester
):
    base, web = web_factory(
        PGAPPNAME=APP,
        DB_POOL_MAX_SIZE=str(POOL),
        DB_POOL_TIMEOUT="3",  # a drained pool would answer 503 within seconds
        HITL_API_WAIT_SECONDS="120",
        HITL_CHECKPOINT_URL=f"{test_database_url}?application_name={CHECKPOINT_APP}",
        HITL_CHECKPOINT_POOL_SIZE=str(CHECKPOINT_POOL),
    )
    token = ApiToken.issue(user=requester, name="waits")[1]
    headers = {"x-api-key": token}
    with httpx.Client(base_url=f"{base}/langgraph", headers=headers, timeout=30) as http:
        thread_ids = [http.post("/threads", json={}).json()["thread_id"] for _ in range(WAITS)]

    answers: dict[str, tuple[str, object]] = {}
    with SessionPeak(test_database_url) as sessions:
        waits = threading.Thread(
            target=asyncio.run, args=(_open_waits(base, token, thread_ids, answers),)
        )
        waits.start()
        try:
            # No worker yet: every run stays queued, so every wait is open at once.
            wait_for(
                lambda: (
                    Run.objects.filter(thread_id__in=thread_ids, status="queued").count() == WAITS
                ),
                60,
                0.1,
                f"{WAITS} queued runs",
            )
            assert answers == {}  # all of them still waiting
            # The pool is not drained: another request is served (a drained pool would
            # answer 503 once its checkout timeout, DB_POOL_TIMEOUT, ran out).
            with httpx.Client(base_url=f"{base}/langgraph", headers=headers) as http:
                answer = http.get(f"/threads/{thread_ids[0]}/runs")
                assert answer.status_code == 200, answer.text
            assert sessions.peak <= POOL

            worker_factory("w1", concurrency=2)
            waits.join(timeout=120)
            assert not waits.is_alive(), "waits did not end"
        finally:
            waits.join(timeout=5)

    assert sessions.samples > 10
    assert sessions.peak <= POOL, f"{sessions.peak} sessions for a pool of {POOL}"
    assert sessions.peak_checkpoints <= CHECKPOINT_POOL
    assert sessions.peak_total <= POOL + CHECKPOINT_POOL
    assert sessions.peak > 0
    errors = {t: a for t, a in answers.items() if a[0] == "error"}
    assert errors == {}
    assert sorted(answers) == sorted(thread_ids)
    for kind, value in answers.values():
        assert isinstance(value, dict) and value.get("__interrupt__"), (kind, value)
        (pending,) = value["__interrupt__"]
        assert pending["value"]["action_request"]["action"] == "send_email", (kind, pending)
    # One run per thread, each paused on its review: nothing repeated, nothing lost.
    runs = Run.objects.filter(thread_id__in=thread_ids)
    assert sorted(runs.values_list("status", flat=True)) == ["interrupted"] * WAITS
    assert "Traceback" not in web.output()
