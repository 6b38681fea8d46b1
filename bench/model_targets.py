"""The servers bench/model_bound.py measures, each serving the three model-bound graphs
of bench/peer_graph.py (blocking, awaited, streaming): HITL (daphne + one Celery
worker, or a threads-pool worker), `langgraph dev` and Aegra, at their defaults or with
their concurrency raised to the number of clients."""

from __future__ import annotations

import time
from pathlib import Path

from bench.common import (
    BIN,
    System,
    free_port,
    hitl_env,
    hitl_prepare,
    install_aegra,
    install_langgraph_dev,
    start_aegra,
    start_langgraph_dev,
    web_command,
)
from bench.peer_servers import CACHE, recreate_database, wait_http

ROOT = Path(__file__).resolve().parent.parent
GRAPH_FILE = ROOT / "bench" / "peer_graph.py"
PY = str(BIN / "python")
VARIANTS = ("blocking", "awaited", "streaming")
TARGETS = (
    "hitl",
    "langgraph-dev",
    "aegra",
    "langgraph-dev-raised",
    "aegra-raised",
    "hitl-threads",
)
DEFAULT_TARGETS = "hitl,langgraph-dev,aegra,langgraph-dev-raised,aegra-raised"
GRAPHS = {v: f"{GRAPH_FILE}:{v}" for v in VARIANTS}


class Target(System):
    """A server of the three graphs; `run_roots` are the processes that run graphs."""

    raised = False
    database_suffix = ""  # set: a Postgres database <db-prefix>_<suffix> of its own

    def __init__(self, args, name: str):
        self.name = name
        super().__init__(args)
        self.trace = self.workdir / "model-trace.log"

    @property
    def database(self) -> str:
        return f"{self.args.db_prefix}_{self.database_suffix}"

    @property
    def databases(self) -> list[str]:  # type: ignore[override]
        return [self.database] if self.database_suffix else []

    def graph_env(self) -> dict[str, str]:
        return {"BENCH_MODEL_TRACE": str(self.trace)}

    def run_roots(self) -> list[int]:
        return [self.procs[0].pid]

    def concurrency(self) -> int:
        return max(self.args.clients)

    def db_sessions(self) -> int:
        """The most Postgres sessions this target's pools may hold (in memory: none)."""
        return 0


class LanggraphDevTarget(Target):
    def install(self) -> None:
        install_langgraph_dev(self)

    def start(self) -> None:
        jobs = self.concurrency() if self.raised else 10
        start_langgraph_dev(
            self,
            GRAPHS,
            run_dir=CACHE / f"{self.name}-model-run",
            jobs=jobs,
            logname=f"{self.name}.log",
            **self.graph_env(),
        )
        self.label = f"langgraph dev, {jobs} jobs per worker"


class AegraTarget(Target):
    database_suffix = "aegra"

    def install(self) -> None:
        install_aegra(self)

    # Aegra's defaults: SQLAlchemy's pool 2 (no overflow), the checkpointer's 6.
    pools = (2, 6)

    def prepare(self) -> None:
        recreate_database(self.args.pg, self.database)

    def raise_pools(self, spare: int) -> None:
        """Pools for <clients> runs, within `spare` sessions of the server's."""
        jobs = self.concurrency()
        wanted = (max(2, jobs // 4), max(6, jobs // 2))
        scale = min(1.0, spare / sum(wanted))
        self.pools = (max(2, int(wanted[0] * scale)), max(6, int(wanted[1] * scale)))

    def db_sessions(self) -> int:
        return sum(self.pools)

    def start(self) -> None:
        extra = dict(self.graph_env())
        if self.raised:
            # Aegra runs every run as a task on its event loop (no cap of its own); what
            # bounds it are its two database pools.
            extra.update(
                SQLALCHEMY_POOL_SIZE=str(self.pools[0]),
                LANGGRAPH_MAX_POOL_SIZE=str(self.pools[1]),
            )
        start_aegra(
            self,
            GRAPHS,
            run_dir=CACHE / f"{self.name}-model-run",
            database=self.database,
            logname=f"{self.name}.log",
            **extra,
        )

    def cpu_roots(self) -> dict[str, int]:
        return {"aegra cli": self.procs[0].pid}

    @property
    def label(self) -> str:
        return f"Aegra, pools {self.pools[0]} + {self.pools[1]}"


class HitlTarget(Target):
    """daphne + one Celery worker as README.md's "Running on a host" starts them."""

    worker_args: list[str] = []
    database_suffix = "hitl"

    def env(self, app: str = "") -> dict[str, str]:
        env = hitl_env(
            self.workdir / "var",
            ",".join(f"{v}=bench.peer_graph:{v}" for v in VARIANTS),
            DATABASE_URL=f"{self.args.pg}/{self.database}",
            REDIS_URL=self.args.redis,
            **self.graph_env(),
        )
        if app:
            env["PGAPPNAME"] = app  # libpq's session name: counted in pg_stat_activity
            # The checkpointer's own pool (state reads in the web process) apart.
            url = f"{self.args.pg}/{self.database}?application_name={app}-checkpoints"
            env["HITL_CHECKPOINT_URL"] = url
        return env

    def db_sessions(self) -> int:
        # Each of daphne and the worker: Django's pool (DB_POOL_MAX_SIZE 8) and the
        # checkpointer's (4).
        return 2 * (8 + 4)

    def prepare(self) -> None:
        import redis

        recreate_database(self.args.pg, self.database)
        redis.Redis.from_url(self.args.redis).flushdb()
        self.api_key = hitl_prepare(self.env(), self.workdir / "token")

    def start(self) -> None:
        port = free_port()
        web, logfile = self.spawn(
            # `-m` so that the code under ROOT is served (a checkout of another commit).
            web_command(port),
            cwd=ROOT,
            env=self.env("bench-web"),
            logname="daphne.log",
        )
        worker, worker_log = self.spawn(
            [
                PY,
                "-m",
                "celery",
                "-A",
                "hitl",
                "worker",
                "-Q",
                "runs,default",
                "-n",
                f"{self.name}@%h",
                *self.worker_args,
                "-l",
                "INFO",
            ],
            cwd=ROOT,
            env=self.env("bench-worker"),
            logname="worker.log",
        )
        self.base_url = f"http://127.0.0.1:{port}/langgraph"
        wait_http(f"{self.base_url}/ok", web, 60, logfile)
        deadline = time.monotonic() + 60
        while "ready to take runs" not in worker_log.read_text(errors="replace"):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(worker_log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)

    def cpu_roots(self) -> dict[str, int]:
        return {"daphne": self.procs[0].pid, "celery parent": self.procs[1].pid}

    def run_roots(self) -> list[int]:
        return [self.procs[1].pid]


class HitlThreadsTarget(HitlTarget):
    @property
    def worker_args(self) -> list[str]:  # type: ignore[override]
        return ["-P", "threads", "-c", str(self.concurrency())]


def make_target(args, name: str) -> Target:
    cls = {
        "hitl": HitlTarget,
        "hitl-threads": HitlThreadsTarget,
        "langgraph-dev": LanggraphDevTarget,
        "langgraph-dev-raised": LanggraphDevTarget,
        "aegra": AegraTarget,
        "aegra-raised": AegraTarget,
    }[name]
    target = cls(args, name)
    target.raised = name.endswith("-raised")
    return target
