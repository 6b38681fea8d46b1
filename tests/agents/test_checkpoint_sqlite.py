"""The embedded checkpointer (SQLite files): set as the app's own database is (WAL,
synchronous=NORMAL: no fsync per commit), and on the run engine's loop each write or read
runs whole on the loop's own thread, with no hop: a task's writes in one transaction,
each committed before the step goes on."""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import threading
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agents.checkpoint import aclose_checkpointers, aget_checkpointer, get_checkpointer
from agents.store import store_for


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    answer: str


def _plan(state: State) -> dict:
    return {"steps": ["plan"]}


def _review(state: State) -> dict:
    return {"answer": interrupt({"question": "ok?"}), "steps": ["review"]}


def _act(state: State) -> dict:
    return {"steps": ["act"]}


def _graph():
    builder = StateGraph(State)
    builder.add_node("plan", _plan)
    builder.add_node("review", _review)
    builder.add_node("act", _act)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "review")
    builder.add_edge("review", "act")
    builder.add_edge("act", END)
    return builder


def _settings(conn) -> tuple:
    return (
        conn.execute("PRAGMA journal_mode").fetchone()[0],
        conn.execute("PRAGMA synchronous").fetchone()[0],
        conn.execute("PRAGMA busy_timeout").fetchone()[0],
    )


def test_every_sqlite_connection_commits_without_an_fsync_each(tmp_path):
    url = f"sqlite:///{tmp_path / 'checkpoints.sqlite3'}"
    wal_normal = ("wal", 1, 20000)  # synchronous: 1 = NORMAL (2, FULL, is sqlite's default)
    assert _settings(get_checkpointer(url).conn) == wal_normal
    assert _settings(store_for(url).conn) == wal_normal

    async def engine_saver():
        saver = await aget_checkpointer(url)
        try:
            return _settings(saver.conn)
        finally:
            await aclose_checkpointers()

    assert asyncio.run(engine_saver()) == wal_normal


def test_a_run_pauses_and_resumes_with_every_checkpoint_operation_on_the_loops_thread(tmp_path):
    path = tmp_path / "checkpoints.sqlite3"
    url = f"sqlite:///{path}"
    config = {"configurable": {"thread_id": "t1"}}

    async def scenario():
        saver = await aget_checkpointer(url)
        operations, statements = [], []
        for name in ("aput", "aput_writes", "aget_tuple"):
            method = getattr(saver, name)

            async def counted(*args, _method=method, _name=name, **kwargs):
                operations.append(_name)
                return await _method(*args, **kwargs)

            setattr(saver, name, counted)
        saver.conn.set_trace_callback(
            lambda sql: statements.append((threading.current_thread().name, sql.split()[0]))
        )
        graph = _graph().compile(checkpointer=saver)
        try:
            paused = await graph.ainvoke({"steps": []}, config, durability="sync")
            done = await graph.ainvoke(Command(resume="yes"), config, durability="sync")
        finally:
            saver.conn.set_trace_callback(None)
            await aclose_checkpointers()
        return paused, done, operations, statements, threading.current_thread().name

    paused, done, operations, statements, loop_thread = asyncio.run(scenario())
    assert paused["__interrupt__"][0].value == {"question": "ok?"}
    assert done == {"steps": ["plan", "review", "act"], "answer": "yes"}
    assert "aput_writes" in operations and "aget_tuple" in operations, operations
    assert {thread for thread, _ in statements} == {loop_thread}
    writes = [op for op in operations if op in ("aput", "aput_writes")]
    assert [sql for _, sql in statements].count("BEGIN") == len(writes)
    # Committed as each operation returned: another connection reads the last checkpoint.
    with sqlite3.connect(path) as db:
        (last,) = db.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't1' "
            "ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
    assert get_checkpointer(url).get_tuple(config).config["configurable"]["checkpoint_id"] == last
