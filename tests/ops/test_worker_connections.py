"""A worker process keeps to its Postgres connection budget however many runs start at
once: `DB_POOL_MAX_SIZE` + `HITL_CHECKPOINT_POOL_SIZE` (8 + 4 by default, the README's
sizing), one checkpointer pool per process; and /metrics says so, per process.

The runs are queued before the workers start, so a fresh process takes many at once and
every run asks for the engine's saver and store together; Postgres's own view of each
worker's sessions (pg_stat_activity, by application_name) is sampled throughout.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hitl.core import runs
from hitl.core.models import Run, Thread
from tests.async_graphs import ASYNC_GRAPHS, TARGETS
from tests.conftest import wait_for
from tests.ops.conftest import OPS_ENV

pytestmark = pytest.mark.postgres

RUNS = 32
DB_POOL = 8
CHECKPOINT_POOL = 4
APP = "hitl-budget-worker"
CHECKPOINT_APP = "hitl-budget-checkpoints"


@pytest.fixture(autouse=True)
def async_graphs(monkeypatch):
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


class Sessions:
    """The most sessions of the worker at once (all, and the checkpointer's alone), and
    of each application name."""

    def __init__(self, database_url: str, apps: tuple[str, ...] = (APP, CHECKPOINT_APP)):
        self.database_url, self.apps = database_url, list(apps)
        self.peak_total = self.peak_checkpoints = self.samples = 0
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            while not self._stop.is_set():
                counts = dict(
                    conn.execute(
                        "SELECT application_name, count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name = ANY(%s) "
                        "GROUP BY 1",
                        (self.apps,),
                    ).fetchall()
                )
                for app, n in counts.items():
                    self.peaks[app] = max(self.peaks.get(app, 0), n)
                self.peak_total = max(self.peak_total, sum(counts.values()))
                self.peak_checkpoints = max(self.peak_checkpoints, counts.get(CHECKPOINT_APP, 0))
                self.samples += 1
                self._stop.wait(0.01)

    def __enter__(self) -> Sessions:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def arrived(folder: Path) -> bool:
    return any(folder.glob("at-model-*"))


def test_runs_starting_together_on_a_fresh_worker_share_one_checkpointer_pool(
    worker_factory, transactional_db, test_database_url, requester, tmp_path
):
    dirs = [tmp_path / f"run{i}" for i in range(RUNS)]
    for folder in dirs:
        folder.mkdir()
    # Queued before the worker exists: the fresh process takes them all at once.
    started = [
        runs.run_start(
            graph="async_gated", input={"dir": str(folder), "gates": ["model"]}, user=requester
        )
        for folder in dirs
    ]
    thread_ids = [run.thread_id for run in started]
    with Sessions(test_database_url) as sessions:
        worker_factory(
            "budget",
            pool="threads",
            concurrency=RUNS * 2,
            **{
                **OPS_ENV,
                "HITL_EXTRA_GRAPHS": ASYNC_GRAPHS,
                "HITL_RUNS_PER_WORKER": str(RUNS * 2),
                "PGAPPNAME": APP,
                "DB_POOL_MAX_SIZE": str(DB_POOL),
                "HITL_CHECKPOINT_URL": f"{test_database_url}?application_name={CHECKPOINT_APP}",
                "HITL_CHECKPOINT_POOL_SIZE": str(CHECKPOINT_POOL),
            },
        )
        wait_for(lambda: all(arrived(f) for f in dirs), 90, 0.1, f"{RUNS} runs to await the model")
        for folder in dirs:
            (folder / "open-model").touch()
        wait_for(
            lambda: Thread.objects.filter(pk__in=thread_ids, status="interrupted").count() == RUNS,
            90,
            0.1,
            "every run to pause",
        )
    assert sessions.samples > 10
    assert not Run.objects.filter(thread_id__in=thread_ids, status="error").exists()
    assert sessions.peak_checkpoints <= CHECKPOINT_POOL, (
        f"{sessions.peak_checkpoints} checkpointer sessions (one pool holds {CHECKPOINT_POOL})"
    )
    assert sessions.peak_total <= DB_POOL + CHECKPOINT_POOL, (
        f"{sessions.peak_total} sessions (budget {DB_POOL + CHECKPOINT_POOL})"
    )


def metrics_of(client) -> dict[str, dict]:
    """Per process: its open connections by pool, its budget and its peak, from /metrics."""
    body = client.get("/metrics").content.decode()
    out: dict[str, dict] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            process = sample.labels.get("process")
            if process is None:
                continue
            report = out.setdefault(process, {"connections": {}})
            if sample.name == "hitl_db_connections":
                report["connections"][sample.labels["pool"]] = sample.value
            elif sample.name == "hitl_db_connections_budget":
                report["budget"] = sample.value
            elif sample.name == "hitl_db_connections_peak":
                report["peak"] = sample.value
    return out


def test_fresh_workers_taking_runs_at_once_keep_to_their_budget_in_metrics(
    worker_factory, transactional_db, test_database_url, requester, tmp_path, client, settings
):
    """Three fresh workers take 16 runs each at once: none opens more than its budget
    (small pools here: 4 + 2), by Postgres's count and by its own report in /metrics."""
    settings.HITL_METRICS_PUBLIC = True
    workers, per_worker, db_pool, checkpoint_pool = 3, 16, 4, 2
    budget = db_pool + checkpoint_pool
    shared = tmp_path / "runs"
    shared.mkdir()
    started = [
        runs.run_start(
            graph="async_gated", input={"dir": str(shared), "gates": ["model"]}, user=requester
        )
        for _ in range(workers * per_worker)
    ]
    thread_ids = [run.thread_id for run in started]
    apps = tuple(f"hitl-budget-{i}" for i in range(workers))
    with Sessions(test_database_url, apps) as sessions:
        names = []
        for i, app in enumerate(apps):
            proc = worker_factory(
                f"budget{i}",
                pool="threads",
                concurrency=per_worker,
                **{
                    **OPS_ENV,
                    "HITL_EXTRA_GRAPHS": ASYNC_GRAPHS,
                    "HITL_RUNS_PER_WORKER": str(per_worker),
                    "PGAPPNAME": app,
                    "DB_POOL_MAX_SIZE": str(db_pool),
                    "HITL_CHECKPOINT_POOL_SIZE": str(checkpoint_pool),
                },
            )
            names.append(f"budget{i}@{socket.gethostname()}")
            assert proc.popen.poll() is None
        wait_for(
            lambda: (
                len(list(shared.glob("at-model-*"))) == workers
                and Run.objects.filter(thread_id__in=thread_ids, status="running").count()
                == len(thread_ids)
            ),
            90,
            0.1,
            "every worker to hold its runs",
        )
        (shared / "open-model").touch()
        wait_for(
            lambda: (
                Thread.objects.filter(pk__in=thread_ids, status="interrupted").count()
                == len(thread_ids)
            ),
            90,
            0.1,
            "every run to pause",
        )
    assert not Run.objects.filter(thread_id__in=thread_ids, status="error").exists()
    for app in apps:
        assert 2 <= sessions.peaks[app] <= budget, (app, sessions.peaks[app])

    def reported() -> dict[str, dict] | None:
        # Each worker reports with its heartbeat: wait for the reports that saw the peak
        # Postgres saw (a report never counts fewer connections than the server had).
        found = metrics_of(client)
        fresh = all(
            found.get(name, {}).get("peak", 0) >= sessions.peaks[app]
            for name, app in zip(names, apps, strict=True)
        )
        return found if fresh else None

    found = wait_for(reported, 30, 0.5, "each worker's connections in /metrics")
    for name, app in zip(names, apps, strict=True):
        report = found[name]
        print(f"{name}: {sessions.peaks[app]} sessions at most (Postgres), {report}")
        # One Django pool and one checkpointer pool: the budget, not a pool per run.
        assert report["budget"] == budget, (name, report)
        assert report["peak"] <= budget, (name, report)
        assert sum(report["connections"].values()) <= budget, (name, report)
        assert report["connections"]["checkpointer"] >= 1, (name, report)
