"""The SQLite side of the checkpointer (the embedded default): its connections' settings
and the saver the run engine's loop uses."""

from __future__ import annotations

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


def loop_sqlite_saver() -> type:
    from langgraph.checkpoint.sqlite import SqliteSaver

    class LoopSqliteSaver(SqliteSaver):
        """The SQLite saver for the run engine's loop: each operation (a checkpoint, a
        task's writes, a read) runs whole on the loop's own thread, with no hop.

        sqlite3 lets go of the GIL while a statement runs, so the process's other
        threads go on meanwhile, and a write to a WAL file with NORMAL sync is a
        write to the OS, not a wait on the disk. A hop to a thread of the
        connection's own cost more than the statements it carried: the loop's thread
        then waited for the GIL on the way back, behind the server's other threads
        (one hop per operation, 13 per review cycle: −7.5% of the embedded server's
        CPU per cycle at 8 clients without them, docs/benchmarks.md). aiosqlite's
        AsyncSqliteSaver hops once per statement, commit and cursor close.

        Operations run in the order the loop calls them, none interleaved with
        another: a task's writes reach the file before the checkpoint that follows
        them. Each write is its own transaction, committed before the step goes on.
        """

        async def aget_tuple(self, config):
            return self.get_tuple(config)

        async def alist(self, config, *, filter=None, before=None, limit=None):
            found = list(self.list(config, filter=filter, before=before, limit=limit))
            for item in found:
                yield item

        async def aput(self, config, checkpoint, metadata, new_versions):
            return self.put(config, checkpoint, metadata, new_versions)

        async def aput_writes(self, config, writes, task_id, task_path=""):
            self.put_writes(config, writes, task_id, task_path)

        async def adelete_thread(self, thread_id):
            self.delete_thread(thread_id)

        async def aget_delta_channel_history(self, *, config, channels):
            return self.get_delta_channel_history(config=config, channels=channels)

        async def aclose(self) -> None:
            self.conn.close()

    return LoopSqliteSaver
