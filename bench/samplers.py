"""What the benchmark scripts sample from /proc and Postgres while they measure: CPU
per process category (server processes and the Postgres backends of their databases),
peak RSS of process trees, and new Postgres sessions."""

from __future__ import annotations

import contextlib
import os
import threading

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
CHILD_LABELS = {"celery parent": "celery children", "aegra cli": "uvicorn (aegra)"}


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(utime + stime, starttime) in clock ticks, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[11]) + int(fields[12]), int(fields[19])


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(p) for p in fh.read().split()]
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`: its children, theirs, and so on."""
    found, stack = [], [pid]
    while stack:
        for child in children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


def boot_ticks_now() -> float:
    with open("/proc/uptime") as fh:
        return float(fh.read().split()[0]) * 1000 / TICK_MS


class Poller:
    """Calls `_sample(initial)` on entry, every `interval` from a thread, and on exit."""

    interval = 0.25

    def _sample(self, initial: bool) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._stop = threading.Event()
        self._sample(initial=True)

        def loop():
            while not self._stop.wait(self.interval):
                self._sample(initial=False)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample(initial=False)


class CpuSampler(Poller):
    """Server CPU over a measurement, per process category.

    Categories come from the system's process roots (each root and its descendants)
    and the Postgres backends of its databases, polled from pg_stat_activity. Each
    pid counts from its value at the start (or from 0 if it started during the
    measurement) to the last value seen; a backend that exits between two polls
    loses only its last < interval of CPU.
    """

    def __init__(self, roots: dict[str, int], databases: list[str], pg_base: str, interval=0.25):
        self.roots, self.databases, self.pg_base, self.interval = (
            roots,
            databases,
            pg_base,
            interval,
        )
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.category: dict[int, str] = {}
        self._conn = None

    def _pids(self) -> dict[int, str]:
        pids: dict[int, str] = {}
        for label, root in self.roots.items():
            pids[root] = label
            for child in descendants(root):
                pids[child] = CHILD_LABELS.get(label, f"{label} children")
        if self._conn is not None and self.databases:
            rows = self._conn.execute(
                "select pid from pg_stat_activity where datname = any(%s)", (self.databases,)
            ).fetchall()
            for (pid,) in rows:
                pids[pid] = "postgres backends"
        return pids

    def _sample(self, initial: bool) -> None:
        for pid, label in self._pids().items():
            stat = proc_stat(pid)
            if stat is None:
                continue
            used, started = stat
            if pid not in self.first:
                # Present at the start: count from there; born during the run: all of it.
                self.first[pid] = 0 if not initial and started >= self.t0_ticks else used
                self.category[pid] = label
            self.last[pid] = used

    def __enter__(self):
        import psycopg

        if self.databases:
            self._conn = psycopg.connect(f"{self.pg_base}/postgres", autocommit=True)
        self.t0_ticks = boot_ticks_now()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self._conn is not None:
            self._conn.close()

    def ms_by_category(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, first in self.first.items():
            label = self.category[pid]
            out[label] = out.get(label, 0.0) + (self.last[pid] - first) * TICK_MS
        return out


class RssSampler(Poller):
    """Peak RSS (sum over each root's process tree, and the largest single process)."""

    def __init__(self, roots: list[int], interval: float = 0.5):
        self.roots, self.interval = roots, interval
        self.peak_total = 0
        self.peak_process = 0

    def _sample(self, initial: bool) -> None:
        sizes = [rss_kb(p) for root in self.roots for p in (root, *descendants(root))]
        self.peak_total = max(self.peak_total, sum(sizes))
        self.peak_process = max(self.peak_process, max(sizes, default=0))


def pg_sessions(pg_base: str, databases: list[str]) -> int:
    import psycopg

    if not databases:
        return 0
    with psycopg.connect(f"{pg_base}/postgres", autocommit=True) as conn:
        conn.execute("select pg_stat_clear_snapshot()")
        row = conn.execute(
            "select coalesce(sum(sessions), 0) from pg_stat_database where datname = any(%s)",
            (databases,),
        ).fetchone()
    return int(row[0])
