"""daphne with what the embedded server does per request counted: SQLite connections and
statements (by database file, statement kind and thread), threads started, and channel
layer group sends (by whether the group had a member).

    python -m tests.counted_daphne -b 127.0.0.1 -p PORT hitl.asgi:application

SIGUSR1 writes the counts since the last signal as JSON to $HITL_COUNTS_FILE and starts
counting afresh. It only watches: sqlite3, threading and the channel layer are wrapped
before daphne imports the app, and every call goes on to the real thing.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import sqlite3
import sys
import threading

from channels.layers import InMemoryChannelLayer

_counts: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()


def _count(key: str) -> None:
    with _lock:
        _counts[key] += 1


def _thread_kind() -> str:
    return threading.current_thread().name.rstrip("0123456789").rstrip("_-")


_connect = sqlite3.connect


def _counted_connect(database, *args, **kwargs):
    conn = _connect(database, *args, **kwargs)
    db = os.path.basename(str(database))
    _count(f"connect {db} {_thread_kind()}")

    def trace(statement: str) -> None:
        words = statement.split()
        verb = words[0].upper() if words else ""
        _count(f"sql {db} {verb}")
        _count(f"sql-thread {db} {_thread_kind()}")
        if verb == "PRAGMA":
            _count(f"pragma {db} {' '.join(words[1:]).lower()}")

    conn.set_trace_callback(trace)
    return conn


_start = threading.Thread.start


def _counted_start(self, *args, **kwargs):
    _count(f"thread-start {self.name.rstrip('0123456789').rstrip('_-')}")
    return _start(self, *args, **kwargs)


_group_send = InMemoryChannelLayer.group_send


async def _counted_group_send(self, group, message):
    _count("group-send " + ("member" if self.groups.get(group) else "nobody"))
    return await _group_send(self, group, message)


def _dump(*_: object) -> None:
    with _lock:
        counts = dict(_counts)
        _counts.clear()
    path = os.environ["HITL_COUNTS_FILE"]
    with open(f"{path}.tmp", "w") as fh:
        json.dump(counts, fh)
    os.replace(f"{path}.tmp", path)


def main() -> None:
    sqlite3.connect = sqlite3.dbapi2.connect = _counted_connect
    threading.Thread.start = _counted_start
    InMemoryChannelLayer.group_send = _counted_group_send
    signal.signal(signal.SIGUSR1, _dump)
    from hitl import web  # daphne on uvloop, as `python -m hitl.web` serves

    web.main(sys.argv[1:])


if __name__ == "__main__":
    main()
