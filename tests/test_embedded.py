"""The embedded default end to end: a real daphne with no DATABASE_URL and no REDIS_URL."""

from __future__ import annotations

import atexit
import collections
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import PYTHON, ROOT, WEB, free_port, spawn, wait_for, web_command

# Anything that would switch the app to Postgres, Redis or Celery is left out.
SERVICE_VARS = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "HITL_CHECKPOINT_URL",
    "HITL_EXECUTOR",
    "HITL_EXTRA_GRAPHS",
)


@pytest.fixture
def embedded(tmp_path):
    """Migrate, create the demo reviewer, serve; yields (base URL, token, var dir)."""
    yield from _serve(tmp_path)


@pytest.fixture
def embedded_async(tmp_path):
    """The same with the async test graphs registered."""
    from tests.async_graphs import ASYNC_GRAPHS

    yield from _serve(tmp_path, HITL_EXTRA_GRAPHS=ASYNC_GRAPHS, PYTHONPATH=str(ROOT))


@pytest.fixture
def embedded_counted(tmp_path):
    """The embedded server under tests/counted_daphne.py, serving the benchmark's graph;
    yields (base URL, token, counts): counts() is what it did since the last call."""
    counts_file = tmp_path / "counts.json"
    procs: list = []
    serving = _serve(
        tmp_path,
        launcher=[PYTHON, "-m", "tests.counted_daphne"],
        procs=procs,
        HITL_EXTRA_GRAPHS="cycle=bench.peer_graph:graph",
        HITL_COUNTS_FILE=str(counts_file),
        PYTHONPATH=str(ROOT),
    )
    base, token, _ = next(serving)
    pid = procs[0].popen.pid

    def counts() -> dict[str, int]:
        counts_file.unlink(missing_ok=True)
        os.kill(pid, signal.SIGUSR1)
        wait_for(counts_file.exists, 10, 0.02, "the counts to be written")
        return json.loads(counts_file.read_text())

    yield base, token, counts
    next(serving, None)


# A var dir migrated and holding the demo reviewer, made once per test process: each
# server starts from a copy of it rather than migrating a database of its own.
_template: Path | None = None


def _service_free_env(var: Path, **extra_env: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(
        {
            "HITL_VAR_DIR": str(var),
            "DJANGO_SETTINGS_MODULE": "hitl.settings",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
    )
    return env


def _migrated_template() -> Path:
    """The template: `make run`'s own steps (migrate, demo_setup), run once."""
    global _template
    if _template is None:
        made = Path(tempfile.mkdtemp(prefix="hitl-embedded-"))
        atexit.register(shutil.rmtree, made, True)
        env = _service_free_env(made / "var")
        manage = [PYTHON, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        setup = subprocess.run(
            [*manage, "demo_setup", "--token-file", str(made / "token")],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        assert "Demo reviewer: reviewer /" in setup.stdout
        _template = made
    return _template


def _serve(
    tmp_path, launcher: list[str] | None = None, procs: list | None = None, **extra_env: str
):
    var = tmp_path / "var"
    template = _migrated_template()
    shutil.copytree(template / "var", var)
    token_file = tmp_path / "token"
    shutil.copyfile(template / "token", token_file)
    env = _service_free_env(var, **extra_env)

    port = free_port()
    proc = spawn(
        web_command(port, launcher=launcher or WEB),
        env,
        tmp_path / "daphne.log",
    )
    if procs is not None:
        procs.append(proc)

    def up() -> bool:
        assert proc.popen.poll() is None, proc.output()[-3000:]
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(up, 30, 0.1, "daphne to listen")
    yield f"http://127.0.0.1:{port}", token_file.read_text().strip(), var
    proc.stop()
    assert "Traceback" not in proc.output(), proc.output()[-3000:]


def _client(request, base: str, token: str) -> httpx.Client:
    """An API client of the embedded server, closed when the test ends."""
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    request.addfinalizer(client.close)
    return client


def test_embedded_default_runs_a_full_approval_cycle(embedded, request):
    base, token, var = embedded
    client = _client(request, base, token)

    started = client.post("/api/v1/threads", json={"graph": "approval", "input": {"request": "q4"}})
    assert started.status_code == 201, started.text
    thread_url = f"/api/v1/threads/{started.json()['thread_id']}"

    def interrupted():
        body = client.get(thread_url).json()
        assert body["status"] != "error", body
        return body if body["status"] == "interrupted" and body["interrupts"] else None

    [interrupt] = wait_for(interrupted, 30, 0.1, "the interrupt to appear")["interrupts"]
    assert interrupt["action_request"]["action"] == "send_email"
    assert interrupt["action_request"]["args"]["subject"] == "Re: q4"

    edit = {"to": "cfo@example.com", "subject": "Q4", "copies": 2, "urgent": True}
    decided = client.post(
        f"/api/v1/interrupts/{interrupt['id']}/decision",
        json={"type": "edit", "args": {"args": edit}},
    )
    assert decided.status_code == 200, decided.text
    again = client.post(f"/api/v1/interrupts/{interrupt['id']}/decision", json={"type": "accept"})
    assert again.status_code == 409
    assert again.json()["detail"] == "Already answered by reviewer."

    def done():
        body = client.get(thread_url).json()
        assert body["status"] != "error", body
        return body if body["status"] == "done" else None

    result = wait_for(done, 30, 0.1, "the thread to finish")["latest_run"]["result"]
    assert result["sent"] is True
    assert result["decision"] == {"type": "edit", "args": {"action": "send_email", "args": edit}}

    # It really ran on SQLite files under HITL_VAR_DIR: the app tables and the checkpoints.
    with sqlite3.connect(var / "hitl.sqlite3") as db:
        statuses = db.execute("SELECT kind, status FROM hitl_run ORDER BY created_at").fetchall()
    assert statuses == [("start", "interrupted"), ("resume", "success")]
    with sqlite3.connect(var / "checkpoints.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] > 0


def test_embedded_default_serves_the_langgraph_cycle_with_a_resume_map(embedded):
    """langgraph_sdk against SQLite: a wait locks its thread and a resume reads the
    pending rows with SQL built once (hitl/core/db/locked_reads.py, answer_statements.py),
    as on PostgreSQL."""
    from langgraph_sdk import get_sync_client

    base, token, var = embedded
    client = get_sync_client(url=f"{base}/langgraph", api_key=token)
    thread = client.threads.create()
    paused = client.runs.wait(thread["thread_id"], "parallel_approval", input={})
    pending = paused["__interrupt__"]
    assert len(pending) == 2
    # One answered first: the other stays pending and the run stays paused.
    first, second = (item["id"] for item in pending)
    partial = client.runs.wait(
        thread["thread_id"], "parallel_approval", command={"resume": {first: {"type": "accept"}}}
    )
    assert [item["id"] for item in partial["__interrupt__"]] == [second]
    unknown = httpx.post(
        f"{base}/langgraph/threads/{thread['thread_id']}/runs/wait",
        headers={"x-api-key": token},
        json={"assistant_id": "parallel_approval", "command": {"resume": {first: "again"}}},
    )
    assert unknown.status_code == 409, unknown.text
    done = client.runs.wait(
        thread["thread_id"], "parallel_approval", command={"resume": {second: {"type": "ignore"}}}
    )
    assert "__interrupt__" not in done
    with sqlite3.connect(var / "hitl.sqlite3") as db:
        answered = db.execute(
            "SELECT response_type FROM hitl_humaninterrupt ORDER BY response_type"
        ).fetchall()
    assert answered == [("accept",), ("ignore",)]
    client.http.client.close()


def test_embedded_default_runs_async_graphs_and_async_only_tools(embedded_async, tmp_path, request):
    """`async def` nodes, an async-only tool under require_approval, and a graph mixing
    sync and async nodes run, pause, are approved and resume in the embedded default."""
    base, token, _ = embedded_async
    client = _client(request, base, token)
    folders = {name: tmp_path / name for name in ("async_gated", "mixed_nodes", "agent")}
    for folder in folders.values():
        folder.mkdir()
    inputs = {
        "async_gated": {"dir": str(folders["async_gated"])},
        "mixed_nodes": {"dir": str(folders["mixed_nodes"])},
        "async_tool_agent": {"request": str(folders["agent"])},
    }
    threads = {}
    for graph, graph_input in inputs.items():
        started = client.post("/api/v1/threads", json={"graph": graph, "input": graph_input})
        assert started.status_code == 201, started.text
        threads[graph] = f"/api/v1/threads/{started.json()['thread_id']}"

    def status_of(url: str, status: str):
        body = client.get(url).json()
        assert body["status"] != "error", body
        return (
            body
            if body["status"] == status and (status != "interrupted" or body["interrupts"])
            else None
        )

    for graph, url in threads.items():
        body = wait_for(lambda url=url: status_of(url, "interrupted"), 30, 0.1, f"{graph} to pause")
        [interrupt] = body["interrupts"]
        answer = {"type": "accept"}
        if graph == "async_tool_agent":
            assert interrupt["action_request"] == {
                "action": "transfer",
                "args": {"folder": str(folders["agent"]), "amount": 5},
            }
            answer = {"type": "edit", "args": {"args": {"amount": 7}}}
        decided = client.post(f"/api/v1/interrupts/{interrupt['id']}/decision", json=answer)
        assert decided.status_code == 200, decided.text
    for graph, url in threads.items():
        wait_for(lambda url=url: status_of(url, "done"), 30, 0.1, f"{graph} to finish")
    assert (folders["async_gated"] / "published.log").read_text().count("\n") == 1
    assert (folders["mixed_nodes"] / "published.log").read_text().count("\n") == 1
    assert (folders["mixed_nodes"] / "prepare.log").read_text().count("\n") == 1
    assert (folders["agent"] / "transfer.log").read_text() == "7\n"  # the edited args, once


def test_an_embedded_cycle_opens_nothing_new_and_sends_only_to_whom_listens(embedded_counted):
    """The benchmark's cycle (bench/peers.py: threads.create, runs.wait to the interrupt,
    runs.wait resuming) on the embedded server, counted once it is warm: each thread
    keeps its SQLite connection, no thread is started per run, a message goes only to
    groups with a member (the waits' status group), checkpoints are committed without
    an fsync each (synchronous=NORMAL) and written whole on the run engine's thread, and
    the cycle's SQLite statements stay within their budget (docs/benchmarks.md)."""
    from langgraph_sdk import get_sync_client

    base, token, counts = embedded_counted
    client = get_sync_client(url=f"{base}/langgraph", api_key=token)

    def cycle() -> None:
        thread = client.threads.create()
        paused = client.runs.wait(thread["thread_id"], "cycle", input={"request": "guard"})
        assert paused["__interrupt__"], paused
        done = client.runs.wait(
            thread["thread_id"], "cycle", command={"resume": [{"type": "accept"}]}
        )
        assert done.get("done") is True, done

    for _ in range(3):  # pools, connections and the run engine are made on first use
        cycle()
    warm = counts()
    assert warm["pragma checkpoints.sqlite3 synchronous=normal"] >= 1, warm
    cycles = 10
    for _ in range(cycles):
        cycle()
    seen = counts()
    client.http.client.close()

    def total(prefix: str) -> int:
        return sum(n for key, n in seen.items() if key.startswith(prefix))

    def by_thread(prefix: str) -> collections.Counter:
        found: collections.Counter = collections.Counter()
        for key, n in seen.items():
            if key.startswith(prefix):
                found[key.rsplit(" ", 1)[1]] += n
        return found

    # No thread per run (a timer used to start one just to queue it): only the pools,
    # still growing to their size, may start one.
    started = by_thread("thread-start ")
    assert set(started) <= {"hitl-run", "hitl-node", "hitl-request"}, seen
    assert sum(started.values()) < cycles, seen
    # A connection per thread, not per request or run: only a thread new in the window,
    # or a background thread's first tick (once per process), opens one.
    for kind, opened in by_thread("connect ").items():
        if kind not in ("hitl-leases", "hitl-sweeper"):
            assert opened <= started[kind], seen
    assert total("group-send nobody") == 0, seen
    assert total("group-send member") == 2 * cycles, seen  # each half's wait hears its end
    checkpoint_threads = {k for k in seen if k.startswith("sql-thread checkpoints.sqlite3 ")}
    assert checkpoint_threads == {"sql-thread checkpoints.sqlite3 hitl-engine"}, seen
    # Five checkpoints and five tasks' writes per cycle, one transaction each.
    assert total("sql checkpoints.sqlite3 BEGIN") == 10 * cycles, seen
    # The cycle's own statements, on the request and run threads (run leases and the
    # sweeper tick on their own), with BEGIN/COMMIT: 14 for the three requests, 21 for
    # the two runs (each lease 5, the ends 6 and 5: run_statements_sqlite); a new pool
    # thread's connection adds its 5 setup statements.
    threads = ("hitl-request", "hitl-run")
    cycle_statements = sum(total(f"sql-thread hitl.sqlite3 {kind}") for kind in threads)
    setup = 5 * sum(by_thread("connect hitl.sqlite3 ")[kind] for kind in threads)
    assert cycle_statements - setup <= 35 * cycles, seen
