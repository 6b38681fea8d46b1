"""The run engine's saver: few statements per review cycle, in the stock saver's tables.

A review cycle (plan -> review (interrupt) -> act, started, then resumed) is what every
run of the benchmark does; its statements are counted on the wire (libpq's trace of
the saver's one connection). The rows stay the stock savers' own: either saver reads
and continues what the other wrote, and both leave the same rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.base import ERROR, INTERRUPT
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Interrupt, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from agents import pg_pool, postgres_saver
from agents.checkpoint import _amake

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class State(TypedDict, total=False):
    request: str
    plan: dict[str, Any]
    notes: list[str]
    decision: Any
    done: bool


def _graph(saver: Any) -> Any:
    def plan(state: State) -> State:
        return {"plan": {"action": "send", "to": state["request"]}, "notes": ["drafted"]}

    def review(state: State) -> State:
        return {"decision": interrupt({"plan": state["plan"]})}

    return (
        StateGraph(State)
        .add_node("plan", plan)
        .add_node("review", review)
        .add_node("act", lambda state: {"done": state["decision"] == {"type": "accept"}})
        .add_edge(START, "plan")
        .add_edge("plan", "review")
        .add_edge("review", "act")
        .add_edge("act", END)
        .compile(checkpointer=saver)
    )


async def _start(graph: Any, config: dict) -> dict:
    return await graph.ainvoke({"request": "team@example.com"}, config, durability="sync")


async def _resume(graph: Any, config: dict, paused: dict) -> dict:
    # By interrupt id, as the run engine answers (hitl/core/worker/graph_input.py).
    answers = {i.id: {"type": "accept"} for i in paused["__interrupt__"]}
    return await graph.ainvoke(Command(resume=answers), config, durability="sync")


def _config() -> dict:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


@contextlib.contextmanager
def _wire(conn: psycopg.AsyncConnection) -> Iterator[dict[str, int]]:
    """Statements and round trips `conn` sends meanwhile, from libpq's trace."""
    counted: dict[str, int] = {}
    with tempfile.TemporaryFile() as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        sent = [line.split("\t") for line in trace.read().decode().splitlines()]
    messages = [fields[2].strip() for fields in sent if fields[0] == "F"]
    # A statement is a simple Query or an extended Execute; a round trip ends with the
    # Sync (or Query) the server answers with ReadyForQuery.
    counted["statements"] = sum(m in ("Query", "Execute") for m in messages)
    counted["round_trips"] = sum(m in ("Query", "Sync") for m in messages)


def test_a_review_cycle_sends_twelve_checkpointer_statements(test_database_url, monkeypatch):
    """Per cycle: the latest checkpoint read at each run's start (2), five checkpoints
    each with its blobs in one statement, and one statement per task's writes (5): 12
    statements in 12 round trips. The stock saver sends 19 (a statement per write and
    per blob)."""
    monkeypatch.setattr(pg_pool, "CHECK_AFTER_IDLE_SECONDS", 3600.0)
    monkeypatch.setattr(pg_pool, "_suspect_until", 0.0)

    async def main() -> tuple[dict[str, int], dict]:
        setup = await _amake(test_database_url, 1)  # the tables (its setup takes two connections)
        await setup.conn.close()
        # The same saver on a pool of one: that connection carries every statement.
        pool = AsyncConnectionPool(
            conninfo=pg_pool.pg_conninfo(test_database_url),
            min_size=1,
            max_size=1,
            kwargs=pg_pool.connect_kwargs(True),
            open=False,
        )
        await pool.open()
        saver = postgres_saver.ordered_async_postgres_saver()(pool)
        try:
            graph = _graph(saver)
            warm = _config()  # every statement prepared once, before counting
            await _resume(graph, warm, await _start(graph, warm))
            config = _config()
            async with saver.conn.connection() as conn:
                pass
            with _wire(conn) as wire:
                result = await _resume(graph, config, await _start(graph, config))
            return wire, result
        finally:
            await saver.conn.close()

    wire, result = asyncio.run(main())
    assert result["done"] is True
    assert wire == {"statements": 12, "round_trips": 12}


def _rows(url: str, thread_id: str) -> dict[str, list[tuple]]:
    """The thread's rows, with what differs between two runs of the same cycle (ids,
    versions, timestamps) left out: which rows there are, and what they hold."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        checkpoints = conn.execute(
            "SELECT checkpoint_ns, parent_checkpoint_id IS NULL AS root, type,"
            " checkpoint -> 'channel_values' AS inline, jsonb_object_keys_sorted,"
            " metadata - 'thread_id' - 'run_id' AS metadata"
            " FROM checkpoints,"
            " LATERAL (SELECT array_agg(k ORDER BY k) AS jsonb_object_keys_sorted"
            "          FROM jsonb_object_keys(checkpoint -> 'channel_versions') k) v"
            " WHERE thread_id = %s ORDER BY checkpoint_id",
            (thread_id,),
        ).fetchall()
        blobs = conn.execute(
            "SELECT checkpoint_ns, channel, type, blob FROM checkpoint_blobs"
            " WHERE thread_id = %s ORDER BY channel, version",
            (thread_id,),
        ).fetchall()
        writes = conn.execute(
            "SELECT c.n AS checkpoint_number, w.checkpoint_ns, w.task_path, w.idx, w.channel,"
            " w.type, w.blob"
            " FROM checkpoint_writes w JOIN ("
            "   SELECT checkpoint_id, row_number() OVER (ORDER BY checkpoint_id) AS n"
            "   FROM checkpoints WHERE thread_id = %s) c USING (checkpoint_id)"
            " WHERE w.thread_id = %s ORDER BY c.n, w.task_path, w.channel, w.idx",
            (thread_id, thread_id),
        ).fetchall()
    return {
        "checkpoints": [tuple(r.values()) for r in checkpoints],
        "blobs": [tuple(r.values()) for r in blobs],
        "writes": [(*tuple(r.values())[:6], _loaded(r["type"], r["blob"])) for r in writes],
    }


def _loaded(kind: str, blob: bytes) -> Any:
    """A write's value; an interrupt's id (a hash of its thread's task) left out."""
    value = JsonPlusSerializer().loads_typed((kind, blob))
    if isinstance(value, list) and all(isinstance(v, Interrupt) for v in value):
        return [v.value for v in value]
    return value


@pytest.mark.parametrize("max_rows", [postgres_saver.MAX_ROWS, 1])
def test_both_savers_leave_the_same_rows_and_continue_each_others_threads(
    test_database_url, monkeypatch, max_rows
):
    """A thread started by this saver and resumed by the stock one, and the other way
    round, ends as a thread run by either alone, with the same rows; the sync
    PostgresSaver (the web process's) reads every one of them. Likewise when a step's
    rows are more than one statement takes (here: more than one)."""
    monkeypatch.setattr(postgres_saver, "MAX_ROWS", max_rows)

    async def main() -> dict[str, tuple[str, dict]]:
        ours = await _amake(test_database_url, 2)
        async with await psycopg.AsyncConnection.connect(
            test_database_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            stock = AsyncPostgresSaver(conn)
            try:
                outcomes = {}
                for name, first, second in [
                    ("ours", ours, ours),
                    ("stock", stock, stock),
                    ("ours then stock", ours, stock),
                    ("stock then ours", stock, ours),
                ]:
                    config = _config()
                    paused = await _start(_graph(first), config)
                    assert "__interrupt__" in paused
                    ended = await _resume(_graph(second), config, paused)
                    outcomes[name] = (config["configurable"]["thread_id"], ended)
                return outcomes
            finally:
                await ours.conn.close()

    outcomes = asyncio.run(main())
    ended = {name: result for name, (_, result) in outcomes.items()}
    assert all(result["done"] is True for result in ended.values())
    assert len({repr(result) for result in ended.values()}) == 1
    rows = {name: _rows(test_database_url, thread_id) for name, (thread_id, _) in outcomes.items()}
    assert {"plan", "notes"} <= {blob[1] for blob in rows["ours"]["blobs"]}
    assert rows["ours"] == rows["stock"] == rows["ours then stock"] == rows["stock then ours"]
    with psycopg.connect(
        test_database_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        sync = PostgresSaver(conn)
        for thread_id, result in outcomes.values():
            config = {"configurable": {"thread_id": thread_id}}
            assert _graph(sync).get_state(config).values == result
            history = list(sync.list(config))
            assert len(history) == 5
            # The pause's checkpoint keeps its pending writes (the interrupt, the answer).
            channels = {w[1] for item in history for w in item.pending_writes}
            assert {INTERRUPT, "plan", "decision", "done"} <= channels


@pytest.mark.parametrize("max_rows", [postgres_saver.MAX_ROWS, 2])
def test_writes_in_one_statement_keep_what_row_by_row_writes_kept(
    test_database_url, monkeypatch, max_rows
):
    """A special channel written twice in one call keeps its last value, as the stock
    saver's upsert per row does; in a call with ordinary channels the first of a key
    stays, as its insert per row does; a repeated call changes nothing. Likewise when
    the rows take more than one statement."""
    monkeypatch.setattr(postgres_saver, "MAX_ROWS", max_rows)
    special = [(INTERRUPT, "first"), (INTERRUPT, "last")]
    mixed = [(ERROR, "failed"), ("plan", {"n": 1}), (ERROR, "failed again")]

    async def main() -> dict[str, list]:
        ours = await _amake(test_database_url, 1)
        async with await psycopg.AsyncConnection.connect(
            test_database_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            stock = AsyncPostgresSaver(conn)
            try:
                found = {}
                for name, saver in [("ours", ours), ("stock", stock)]:
                    config = {
                        "configurable": {
                            "thread_id": str(uuid.uuid4()),
                            "checkpoint_ns": "",
                            "checkpoint_id": "1",
                        }
                    }
                    for writes, task in [(special, "a"), (mixed, "b"), (mixed, "b")]:
                        await saver.aput_writes(config, writes, task)
                    await saver.aput_writes(config, [], "c")
                    async with saver._cursor() as cur:
                        await cur.execute(
                            "SELECT task_id, idx, channel, type, blob FROM checkpoint_writes"
                            " WHERE thread_id = %s ORDER BY task_id, idx",
                            (config["configurable"]["thread_id"],),
                        )
                        found[name] = [
                            (
                                r["task_id"],
                                r["idx"],
                                r["channel"],
                                saver.serde.loads_typed((r["type"], r["blob"])),
                            )
                            for r in await cur.fetchall()
                        ]
                return found
            finally:
                await ours.conn.close()

    found = asyncio.run(main())
    assert found["ours"] == found["stock"]
    assert found["ours"] == [
        ("a", -3, INTERRUPT, "last"),
        ("b", -1, ERROR, "failed"),
        ("b", 1, "plan", {"n": 1}),
    ]
