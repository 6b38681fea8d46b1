"""The async Postgres saver the run engine streams graphs with: a thread's writes in
order, retried on another session when theirs was dropped, and each write in one
statement (made by the factories in agents/checkpoint.py)."""

from __future__ import annotations

import functools
import inspect

from agents.pg_pool import aretry, mark_returned

# The saver's writes as single statements: a task's writes, or a checkpoint with its
# blobs, go in one statement and one round trip, where the stock saver sends a statement
# per row. Rows and columns are the stock saver's, unchanged: the stock savers read what
# these write, and the other way round. One text per number of rows (a graph has a few),
# each prepared once per session; rows as VALUES, not as arrays to unnest, which psycopg
# adapts in Python at several times the cost.
_CHECKPOINT_SQL = """
    INSERT INTO checkpoints
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
    DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata
"""
# Rows per statement: at 9 parameters a row, well within the protocol's 65535. More go in
# several statements, in one transaction.
MAX_ROWS = 1000


def _values(rows: int, columns: int) -> str:
    row = "(" + ", ".join(["%s"] * columns) + ")"
    return ", ".join([row] * rows)


@functools.cache
def blobs_sql(rows: int) -> str:
    return f"""
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    VALUES {_values(rows, 6)}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING"""


@functools.cache
def checkpoint_sql(blobs: int) -> str:
    """The checkpoint's upsert after its blobs' inserts, in one statement."""
    return f"WITH blobs AS ({blobs_sql(blobs)}){_CHECKPOINT_SQL}" if blobs else _CHECKPOINT_SQL


@functools.cache
def writes_sql(rows: int, upsert: bool) -> str:
    """A task's writes: replacing those of the same key, or (`upsert` False) leaving
    them be, as the stock saver's statements per row do."""
    action = (
        "UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
        if upsert
        else "NOTHING"
    )
    return f"""
    INSERT INTO checkpoint_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    VALUES {_values(rows, 9)}
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO {action}"""


def _chunks(rows: list) -> list[list]:
    return [rows[i : i + MAX_ROWS] for i in range(0, len(rows), MAX_ROWS)]


def _flat(rows: list) -> list:
    return [value for row in rows for value in row]


def ordered_async_postgres_saver() -> type:
    import asyncio
    import contextlib

    import psycopg
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        CheckpointTuple,
        get_serializable_checkpoint_metadata,
    )
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
    from psycopg.rows import dict_row
    from psycopg.types.json import Jsonb
    from psycopg_pool import AsyncConnectionPool

    class OrderedAsyncPostgresSaver(AsyncPostgresSaver):
        """AsyncPostgresSaver whose task writes reach the database before the checkpoint
        that follows them, as with the sync saver, whose writes are retried on another
        connection when their session was dropped (aretry), and which writes a task's
        writes, or a checkpoint with its blobs, in one statement.

        The stock `aput_writes` serializes on a thread before taking the saver's lock,
        so the step's checkpoint, submitted after it, gets there first: a worker killed
        in between then loses writes the sync saver would have kept (and the node runs
        again). Serialized inline, the writes take the lock first. (Serializing holds
        the GIL either way: a thread of its own bought the loop nothing but hand-offs,
        so checkpoints are serialized and read back inline too.)

        The stock saver's lock is one per process, around every statement: it is made
        for one shared connection. On a pool every statement has a connection of its
        own, so the lock here is one per thread, around its writes: a thread's writes
        keep their order while the runs of other threads write at the same time.

        The stock saver sends a statement per row (per write; per blob, then the
        checkpoint), pipelined: 19 statements per review cycle where these send 12, at
        half the stock saver's instructions (bench/README.md). A thread's first run
        sends 11: its lease read that the thread has no checkpoint yet (expect_empty).
        """

        def __init__(self, conn, *args, **kwargs):
            super().__init__(conn, *args, **kwargs)
            if self.pipe is None and not isinstance(conn, psycopg.AsyncConnection):
                self.lock = contextlib.nullcontext()
            self._writers: dict[str, tuple[asyncio.Lock, int]] = {}
            self._empty: set[str] = set()

        def expect_empty(self, thread_id: str) -> None:
            """The thread has no checkpoint yet (its run's lease read as much, in the
            same database): the run's first read of its latest checkpoint is answered
            without asking. Any other read or write of the thread forgets it. Called on
            the saver's loop."""
            self._empty.add(thread_id)

        def forget_empty(self, thread_id: str) -> None:
            self._empty.discard(thread_id)

        async def _write(self, config, statements):
            """Run a write's statements after the thread's earlier writes, retried
            (aretry)."""
            thread_id = str(config["configurable"]["thread_id"])
            self._empty.discard(thread_id)
            lock, users = self._writers.get(thread_id, (None, 0))
            lock = lock or asyncio.Lock()
            self._writers[thread_id] = (lock, users + 1)
            try:
                async with lock:
                    await aretry(lambda: self._execute(statements))
            finally:
                lock, users = self._writers[thread_id]
                if users > 1:
                    self._writers[thread_id] = (lock, users - 1)
                else:
                    del self._writers[thread_id]

        async def aget_tuple(self, config):
            """The stock read, again on another connection if its session was dropped
            (aretry): a run's first read otherwise goes back to the queue for it."""
            if self._empty:
                configurable = config["configurable"]
                thread_id = str(configurable["thread_id"])
                if thread_id in self._empty:
                    self._empty.discard(thread_id)
                    if not configurable.get("checkpoint_ns") and not configurable.get(
                        "checkpoint_id"
                    ):
                        return None
            read = super().aget_tuple
            return await aretry(lambda: read(config))

        async def aput(self, config, checkpoint, metadata, new_versions):
            await self._write(
                config, self._checkpoint_statements(config, checkpoint, metadata, new_versions)
            )
            configurable = config["configurable"]
            return {
                "configurable": {
                    "thread_id": configurable["thread_id"],
                    "checkpoint_ns": configurable["checkpoint_ns"],
                    "checkpoint_id": checkpoint["id"],
                }
            }

        def _checkpoint_statements(self, config, checkpoint, metadata, new_versions):
            """The checkpoint with its primitive values inline, the others as blobs
            (those of the channels this step changed), as the stock saver stores them."""
            configurable = config["configurable"]
            thread_id, checkpoint_ns = configurable["thread_id"], configurable["checkpoint_ns"]
            inline = dict(checkpoint["channel_values"])
            blobs = {}
            for channel, value in checkpoint["channel_values"].items():
                if isinstance(value, _DeltaSnapshot):
                    blobs[channel] = value
                    inline[channel] = True  # the stock saver's marker of a snapshot blob
                elif value is not None and not isinstance(value, (str, int, float, bool)):
                    blobs[channel] = inline.pop(channel)
            versions = {k: v for k, v in new_versions.items() if k in blobs}
            rows = self._dump_blobs(thread_id, checkpoint_ns, blobs, versions)
            *before, last = _chunks(rows) or [[]]
            row = (
                thread_id,
                checkpoint_ns,
                checkpoint["id"],
                configurable.get("checkpoint_id"),
                Jsonb({**checkpoint, "channel_values": inline}),
                Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
            )
            return [(blobs_sql(len(chunk)), _flat(chunk)) for chunk in before] + [
                (checkpoint_sql(len(last)), _flat([*last, row]))
            ]

        async def aput_writes(self, config, writes, task_id, task_path=""):
            if writes:
                await self._write(
                    config, self._writes_statements(config, writes, task_id, task_path)
                )

        def _writes_statements(self, config, writes, task_id, task_path):
            configurable = config["configurable"]
            rows = self._dump_writes(
                configurable["thread_id"],
                configurable["checkpoint_ns"],
                configurable["checkpoint_id"],
                task_id,
                task_path,
                writes,
            )
            upsert = all(w[0] in WRITES_IDX_MAP for w in writes)
            if upsert:
                # Row by row, a special channel written twice kept its last value; one
                # statement may not update a row twice, so only the last goes. (Inserted
                # row by row, the first of a key stayed: in one statement too.)
                rows = list({row[5]: row for row in rows}.values())
            return [(writes_sql(len(chunk), upsert), _flat(chunk)) for chunk in _chunks(rows)]

        async def _load_checkpoint_tuple(self, value):
            """The stock method's tuple, its pending writes loaded here rather than on a
            thread of their own (see above)."""
            thread_id, checkpoint_ns = value["thread_id"], value["checkpoint_ns"]
            parent_id = value["parent_checkpoint_id"]
            inline = value["checkpoint"].get("channel_values") or {}
            return CheckpointTuple(
                config={
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": checkpoint_ns,
                        "checkpoint_id": value["checkpoint_id"],
                    }
                },
                checkpoint={
                    **value["checkpoint"],
                    "channel_values": {**inline, **self._load_blobs(value["channel_values"])},
                },
                metadata=value["metadata"],
                parent_config=(
                    {
                        "configurable": {
                            "thread_id": thread_id,
                            "checkpoint_ns": checkpoint_ns,
                            "checkpoint_id": parent_id,
                        }
                    }
                    if parent_id
                    else None
                ),
                pending_writes=self._load_writes(value["pending_writes"]),
            )

        async def _execute(self, statements):
            """Run statements on one connection: one alone (its own transaction), more
            in a transaction."""
            if not isinstance(self.conn, AsyncConnectionPool):
                async with self._cursor() as cur:
                    await _run(cur, statements)
                return
            # The pool's own context manager, without its share of the cost: autocommit
            # leaves nothing to commit, and the pool rolls back what a failure left open.
            conn = await self.conn.getconn()
            try:
                await _run(_cursor_of(conn), statements)
            finally:
                mark_returned(conn)
                await self.conn.putconn(conn)

        @contextlib.asynccontextmanager
        async def _cursor(self, *, pipeline=False):
            """The stock saver's cursor (its reads use it), on a pool: the connection's
            own cursor, and the connection marked as it goes back (mark_returned; a
            reset hook on the pool would cost a task of the pool's worker each time)."""
            if not isinstance(self.conn, AsyncConnectionPool):
                async with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
                return
            conn = await self.conn.getconn()
            try:
                if pipeline:
                    async with conn.pipeline():
                        yield _cursor_of(conn)
                else:
                    yield _cursor_of(conn)
            finally:
                mark_returned(conn)
                await self.conn.putconn(conn)

    # LangGraph asks on every run whether `aput_writes` takes a task path, with
    # inspect.signature: a signature given answers at once.
    aput_writes = OrderedAsyncPostgresSaver.aput_writes
    aput_writes.__signature__ = inspect.signature(aput_writes)

    def _cursor_of(conn):
        """The connection's one cursor, kept for its statements: a cursor of their own
        cost each of them its adapters set up anew. (It holds the last result until the
        next statement; the pool's connections are few.)"""
        cur = getattr(conn, "_hitl_cursor", None)
        if cur is None:
            cur = conn._hitl_cursor = conn.cursor(binary=True, row_factory=dict_row)
        return cur

    async def _run(cur, statements):
        if len(statements) == 1:
            await cur.execute(*statements[0])
            return
        async with cur.connection.transaction():
            for sql, params in statements:
                await cur.execute(sql, params)

    return OrderedAsyncPostgresSaver
