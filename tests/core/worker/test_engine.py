"""The run engine: async graphs run, pause and resume, in this process and on workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitl.core import audit, decisions, runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread, ToolExecution
from hitl.core.worker.engine import leases
from tests.async_graphs import ASYNC_GRAPHS, TARGETS
from tests.conftest import ROOT, wait_for


@pytest.fixture
def async_graphs(monkeypatch):
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


def count(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def cycle(manual_runs, requester, reviewer, graph: str, graph_input: dict, answer: dict) -> Run:
    """Start, pause on one interrupt, answer it, resume to the end: in this process."""
    run = runs.run_start(graph=graph, input=graph_input, user=requester)
    assert manual_runs(run) == "interrupted"
    [row] = HumanInterrupt.objects.filter(thread_id=run.thread_id, status="pending")
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, **answer)
    resume = Run.objects.get(thread_id=run.thread_id, kind="resume")
    assert manual_runs(resume) == "success"
    resume.refresh_from_db()
    assert Thread.objects.get(pk=run.thread_id).status == "done"
    return resume


def test_async_nodes_run_pause_and_resume(
    manual_runs, async_graphs, transactional_db, requester, reviewer, tmp_path
):
    resume = cycle(
        manual_runs,
        requester,
        reviewer,
        "async_gated",
        {"dir": str(tmp_path)},
        {"response_type": "accept"},
    )
    assert resume.result["plan"] == "a plan"  # from the async-only chat model
    assert resume.result["decision"] == {"type": "accept", "args": None}
    assert count(tmp_path / "published.log") == 1
    assert count(tmp_path / "plan.log") == 1


def test_a_graph_mixing_sync_and_async_nodes_runs(
    manual_runs, async_graphs, transactional_db, requester, reviewer, tmp_path
):
    resume = cycle(
        manual_runs,
        requester,
        reviewer,
        "mixed_nodes",
        {"dir": str(tmp_path)},
        {"response_type": "ignore"},
    )
    assert resume.result["plan"] == "a plan"
    assert count(tmp_path / "prepare.log") == 1
    assert count(tmp_path / "published.log") == 0  # ignored: not acted on


@pytest.mark.parametrize(
    ("answer", "ran"),
    [
        ({"response_type": "accept"}, "5\n"),
        ({"response_type": "edit", "args": {"args": {"amount": 9}}}, "9\n"),
        ({"response_type": "ignore"}, ""),
    ],
)
def test_an_async_only_tool_under_approval_runs_once_through_the_ledger(
    manual_runs, async_graphs, transactional_db, requester, reviewer, tmp_path, answer, ran
):
    resume = cycle(
        manual_runs, requester, reviewer, "async_tool_agent", {"request": str(tmp_path)}, answer
    )
    log = tmp_path / "transfer.log"
    assert (log.read_text() if log.exists() else "") == ran
    executions = list(ToolExecution.objects.filter(thread_id=resume.thread_id))
    if ran:
        [execution] = executions
        assert (execution.tool, execution.status) == ("transfer", "done")
        assert execution.result["content"] == f"transferred {ran.strip()}"
        assert resume.result["messages"][-1]["content"] == f"Done: transferred {ran.strip()}"
    else:
        assert executions == []


def test_a_repeated_async_tool_call_replays_the_recorded_result(transactional_db, requester):
    """The ledger guards async tools: an approved call that runs again (its worker died
    after the call, before the checkpoint) replays the recorded result instead."""
    import asyncio

    from langchain_core.messages import ToolMessage

    from agents.tools.approval import _aexecute_once
    from tests.core.worker.conftest import request_for

    thread = Thread.objects.create(graph="demo", requester=requester)
    calls: list[str] = []

    async def execute(request):
        calls.append(request.tool_call["id"])
        return ToolMessage(content="sent 5", tool_call_id=request.tool_call["id"], name="x")

    async def twice():
        first = await _aexecute_once(request_for(thread), execute)
        again = await _aexecute_once(request_for(thread), execute)
        return first, again

    first, again = asyncio.run(twice())
    assert calls == ["call-1"]
    assert first.content == again.content == "sent 5"
    assert again.artifact == {"review": "replayed", "executed": True}
    [row] = ToolExecution.objects.filter(thread=thread)
    assert (row.status, row.result["content"]) == ("done", "sent 5")


def test_a_cancel_stops_a_run_awaiting_a_model_without_waiting_for_the_tick(
    manual_runs, async_graphs, transactional_db, requester, tmp_path, monkeypatch
):
    """The web announces a stop (hitl.core.live.stops): the worker does not wait for its
    next lease tick, here two minutes away, to stop a run that awaits its model; the run
    opens no interrupt after it."""
    import threading

    monkeypatch.setattr(leases, "CHECK_INTERVAL", 120.0)
    run = runs.run_start(
        graph="async_gated", input={"dir": str(tmp_path), "gates": ["model"]}, user=requester
    )
    outcome: list[str] = []
    runner = threading.Thread(target=lambda: outcome.append(manual_runs(run)))
    runner.start()
    wait_for(lambda: list(tmp_path.glob("at-model-*")), 30, what="the run to await the model")
    runs.thread_cancel(thread=Thread.objects.get(pk=run.thread_id), user=requester)
    wait_for(lambda: outcome, 60, what="the cancelled run to stop")
    assert outcome == ["cancelled"]
    assert leases.held() == 0
    assert not HumanInterrupt.objects.filter(thread_id=run.thread_id).exists()
    cancelled = AuditEvent.objects.get(kind=audit.Kind.RUN_CANCELLED, run_id=run.pk)
    assert cancelled.data["reason"] == "thread cancelled" and cancelled.actor == requester


# --- the production layout: a Celery worker on the threads pool ------------------------

WORKER_ENV = {
    "HITL_EXTRA_GRAPHS": ASYNC_GRAPHS,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "HITL_RUN_LEASE_SECONDS": "2",
}


@pytest.mark.postgres
def test_async_graphs_on_a_threads_pool_worker(
    worker_factory, async_graphs, transactional_db, requester, reviewer, tmp_path
):
    worker_factory("async", pool="threads", concurrency=8, **WORKER_ENV)
    folders = {g: tmp_path / g for g in TARGETS}
    for folder in folders.values():
        folder.mkdir()
    inputs = {
        "async_gated": {"dir": str(folders["async_gated"])},
        "mixed_nodes": {"dir": str(folders["mixed_nodes"])},
        "async_tool_agent": {"request": str(folders["async_tool_agent"])},
    }
    started = {g: runs.run_start(graph=g, input=i, user=requester) for g, i in inputs.items()}

    def status(run: Run, wanted: str):
        thread = Thread.objects.get(pk=run.thread_id)
        if thread.status == "error":
            raise AssertionError(Run.objects.filter(thread_id=run.thread_id).last().error)
        return thread.status == wanted

    for graph, run in started.items():
        wait_for(lambda run=run: status(run, "interrupted"), 30, 0.1, f"{graph} to pause")
        [row] = HumanInterrupt.objects.filter(thread_id=run.thread_id)
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    for graph, run in started.items():
        wait_for(lambda run=run: status(run, "done"), 30, 0.1, f"{graph} to finish")
    assert count(folders["async_gated"] / "published.log") == 1
    assert count(folders["mixed_nodes"] / "published.log") == 1
    assert (folders["async_tool_agent"] / "transfer.log").read_text() == "5\n"
    for run in started.values():
        assert Run.objects.get(thread_id=run.thread_id, kind="resume").attempts == 1


# --- an MCP tool through langchain-mcp-adapters, against a real MCP server ------------


@pytest.fixture
def mcp_server(tmp_path, monkeypatch, async_graphs):
    """The `mcp` package's server in its own process; the registry builds the agent anew."""
    import socket

    from hitl.core.registry import registry
    from tests.conftest import PYTHON, free_port, spawn

    port = free_port()
    proc = spawn(
        [PYTHON, str(ROOT / "tests" / "mcp_bank_server.py"), str(port)],
        dict(os.environ),
        tmp_path / "mcp.log",
    )

    def up() -> bool:
        assert proc.popen.poll() is None, proc.output()[-3000:]
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(up, 30, 0.1, "the MCP server to listen")
    monkeypatch.setenv("HITL_TEST_MCP_URL", f"http://127.0.0.1:{port}/mcp")
    for key in [k for k in registry._loaded if k[0] == "mcp_agent"]:
        monkeypatch.delitem(registry._loaded, key)
    yield proc
    proc.stop()
    for key in [k for k in registry._loaded if k[0] == "mcp_agent"]:
        registry._loaded.pop(key, None)


@pytest.mark.parametrize(
    ("answer", "ran"),
    [
        ({"response_type": "accept"}, "5\n"),
        ({"response_type": "edit", "args": {"args": {"amount": 8}}}, "8\n"),
        ({"response_type": "ignore"}, ""),
    ],
)
def test_an_mcp_tool_under_approval_runs_as_decided(
    mcp_server, manual_runs, transactional_db, requester, reviewer, tmp_path, answer, ran
):
    folder = tmp_path / "bank"
    folder.mkdir()
    run = runs.run_start(graph="mcp_agent", input={"request": str(folder)}, user=requester)
    assert manual_runs(run) == "interrupted"
    [row] = HumanInterrupt.objects.filter(thread_id=run.thread_id)
    assert (row.action, row.args) == ("transfer", {"folder": str(folder), "amount": 5})
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, **answer)
    resume = Run.objects.get(thread_id=run.thread_id, kind="resume")
    assert manual_runs(resume) == "success"
    log = folder / "transfer.log"
    assert (log.read_text() if log.exists() else "") == ran  # once, with the decided args
    assert ToolExecution.objects.filter(thread_id=run.thread_id).count() == (1 if ran else 0)
