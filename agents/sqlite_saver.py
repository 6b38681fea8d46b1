"""The SQLite side of the checkpointer (the embedded default): its connections' settings
and the saver the run engine's loop uses."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

# Every SQLite connection of the checkpointer and the store, set as the app's own
# database is (hitl/settings.py): WAL, so readers never block the writer; NORMAL sync,
# so a commit is safe once it is handed to the OS (it survives the process being killed;
# an OS crash may lose the last commits, of the app's database too) without an fsync
# per commit, ~5 ms each on a VM's disk and ten per review cycle; and a busy timeout,
# so the process's connections wait for each other.
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=20000",
)


def threaded_sqlite_saver() -> type:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from langgraph.checkpoint.sqlite import SqliteSaver

    class ThreadedSqliteSaver(SqliteSaver):
        """The SQLite saver for the run engine's loop: each operation (a checkpoint, a
        task's writes, a read) runs whole on the connection's own thread, one hop there
        and back. aiosqlite's AsyncSqliteSaver hops once per statement, commit and
        cursor close: about 40 hops per review cycle instead of 13.

        One thread, first in first out: a task's writes reach the file before the
        checkpoint that follows them, as the operations were submitted. Each write is
        its own transaction, committed before the step goes on.
        """

        def __init__(self, conn: sqlite3.Connection) -> None:
            super().__init__(conn)
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitl-checkpoints")

        async def _on_thread(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._thread, lambda: func(*args, **kwargs))

        async def aget_tuple(self, config):
            return await self._on_thread(self.get_tuple, config)

        async def alist(self, config, *, filter=None, before=None, limit=None):
            found = await self._on_thread(
                lambda: list(self.list(config, filter=filter, before=before, limit=limit))
            )
            for item in found:
                yield item

        async def aput(self, config, checkpoint, metadata, new_versions):
            return await self._on_thread(self.put, config, checkpoint, metadata, new_versions)

        async def aput_writes(self, config, writes, task_id, task_path=""):
            await self._on_thread(self.put_writes, config, writes, task_id, task_path)

        async def adelete_thread(self, thread_id):
            await self._on_thread(self.delete_thread, thread_id)

        async def aget_delta_channel_history(self, *, config, channels):
            return await self._on_thread(
                self.get_delta_channel_history, config=config, channels=channels
            )

        async def aclose(self) -> None:
            await self._on_thread(self.conn.close)
            self._thread.shutdown(wait=False)

    return ThreadedSqliteSaver
