"""What the web process spends on a benchmark cycle, guarded: thread hops and SQL.

The cycle of bench/peers.py, through the ASGI handler daphne serves (in process):
`threads.create`, `runs.wait` to the interrupt, `runs.wait` resuming it. Hops are
round trips from the event loop to the request's sync thread (`sync_to_async`);
statements are what PostgreSQL's log would show for this process (BEGIN and COMMIT
included). A regression shows up as a count, not as milliseconds: lower the numbers
when a change removes one. bench/peers.py measures the CPU.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref.sync import SyncToAsync
from asgiref.testing import ApplicationCommunicator
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from hitl.api.tokens import user_for_key
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.middleware import ASGIHandler
from tests.api.conftest import token_for

pytestmark = pytest.mark.postgres


class Meter:
    """Hops, and the requests' threads' statements, as they happen."""

    def __init__(self) -> None:
        self.hops: list[str] = []
        self.statements: list[str] = []
        self.counting = True

    def take(self) -> tuple[list[str], list[str]]:
        taken = (list(self.hops), list(self.statements))
        self.hops.clear()
        self.statements.clear()
        return taken


@pytest.fixture
def meter(monkeypatch) -> Meter:
    seen = Meter()
    hop = SyncToAsync.__call__
    execute = CursorWrapper._execute_with_wrappers
    commit = BaseDatabaseWrapper.commit
    open_transactions: set[int] = set()

    def on_request_thread() -> bool:
        return seen.counting and threading.current_thread().name.startswith("hitl-request")

    def counted_hop(self, *args, **kwargs):
        if seen.counting:
            seen.hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return hop(self, *args, **kwargs)

    def counted_execute(self, sql, params, many, executor):
        if on_request_thread():
            # psycopg sends a BEGIN before a transaction's first statement.
            if not self.db.get_autocommit() and id(self.db) not in open_transactions:
                open_transactions.add(id(self.db))
                seen.statements.append("BEGIN")
            seen.statements.append(" ".join(str(sql).split())[:60])
        return execute(self, sql, params, many, executor)

    def counted_commit(self):
        if on_request_thread():
            open_transactions.discard(id(self))
            seen.statements.append("COMMIT")
        return commit(self)

    monkeypatch.setattr(SyncToAsync, "__call__", counted_hop)
    monkeypatch.setattr(CursorWrapper, "_execute_with_wrappers", counted_execute)
    monkeypatch.setattr(BaseDatabaseWrapper, "commit", counted_commit)
    return seen


def _scope(path: str, key: str) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"x-api-key", key.encode()),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


async def post(app, path: str, key: str, body: dict, *, while_waiting=None) -> tuple[int, dict]:
    """POST `body`; once a wait's first (keep-alive) chunk is in, `while_waiting()`."""
    communicator = ApplicationCommunicator(app, _scope(path, key))
    await communicator.send_input(
        {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
    )
    start = await communicator.receive_output(20)
    chunks = []
    while True:
        message = await communicator.receive_output(30)
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
        if while_waiting is not None and len(chunks) == 1:
            await while_waiting()
    await communicator.wait(20)
    return start["status"], json.loads(b"".join(chunks))


def test_a_benchmark_cycle_costs_the_web_process_one_hop_per_request_and_six_statements(
    transactional_db, manual_runs, admin_user, meter
):
    key = token_for(admin_user)
    assert user_for_key(key) == admin_user  # as after the client's first request
    app = ASGIHandler()
    costs: dict[str, tuple[list[str], list[str]]] = {}

    async def execute_paused_run(thread_id) -> None:
        # The worker's part, not counted: the run the wait waits for.
        meter.counting = False
        run = await asyncio.to_thread(
            lambda: Run.objects.filter(thread_id=thread_id).order_by("-created_at").first()
        )
        await asyncio.to_thread(manual_runs, run.pk)
        meter.counting = True

    async def cycle() -> None:
        status, thread = await post(app, "/langgraph/threads", key, {})
        assert status == 200
        costs["threads.create"] = meter.take()
        thread_id = thread["thread_id"]
        waits = f"/langgraph/threads/{thread_id}/runs/wait"

        async def before_the_run_ends() -> None:
            costs[phase] = meter.take()
            await execute_paused_run(thread_id)

        phase = "start"
        status, paused = await post(
            app,
            waits,
            key,
            {"assistant_id": "approval", "input": {"request": "bench"}},
            while_waiting=before_the_run_ends,
        )
        assert status == 200 and paused["__interrupt__"], paused
        after = meter.take()
        costs["start"] = (costs["start"][0] + after[0], costs["start"][1] + after[1])

        phase = "resume"
        status, ended = await post(
            app,
            waits,
            key,
            {"assistant_id": "approval", "command": {"resume": {"type": "accept"}}},
            while_waiting=before_the_run_ends,
        )
        assert status == 200 and "__interrupt__" not in ended, ended
        after = meter.take()
        costs["resume"] = (costs["resume"][0] + after[0], costs["resume"][1] + after[1])

    asyncio.run(cycle())

    # The cycle did what it does: one run paused and answered, one resumed.
    row = HumanInterrupt.objects.get()
    assert row.status == "resolved" and row.responded_by == admin_user
    assert AuditEvent.objects.filter(kind="interrupt.answered", interrupt_id=row.pk).count() == 1
    assert sorted(Run.objects.values_list("kind", "status")) == [
        ("resume", "success"),
        ("start", "interrupted"),
    ]
    assert Thread.objects.get().status == "done"

    closing = "HttpResponseBase.close"
    work = {name: [h for h in cost[0] if h != closing] for name, cost in costs.items()}
    statements = {name: cost[1] for name, cost in costs.items()}
    # One hop each for the view's database work: none for CSRF on an exempt view, for a
    # cached token, or for request_started (its database receivers are off, see
    # hitl/middleware.py); Django's closing of the response (request_finished) is the
    # one other.
    assert {name: len(hops) for name, hops in work.items()} == {
        "threads.create": 1,
        "start": 1,
        "resume": 1,
    }, costs
    assert not any("asend" in hop for hops in work.values() for hop in hops), costs
    # (A wait's closing may fall in the uncounted stretch while the run executes.)
    assert costs["threads.create"][0].count(closing) == 1, costs
    assert all(cost[0].count(closing) <= 1 for cost in costs.values()), costs
    # threads.create: its INSERT. A start: one statement that marks the thread busy
    # and inserts the run (no transaction). A resume: the thread and its pending rows
    # locked (one statement), the answer with its audit event and the resume run, in a
    # transaction.
    assert [len(s) for s in statements.values()] == [1, 1, 4], statements
    assert statements["resume"][0] == "BEGIN" and statements["resume"][-1] == "COMMIT"
