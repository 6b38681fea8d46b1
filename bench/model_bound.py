"""Model-bound agents: the peer cycle whose `plan` node waits L seconds on a model.

The cycle of bench/peers.py, driven through the real langgraph_sdk client:
`threads.create()` -> `runs.wait(input=...)` until the graph pauses on its interrupt
-> `runs.wait(command={"resume": [...]})` until it ends. The graph is
bench/peer_graph.py; its `plan` node takes L seconds (`--latency`, sent with the
input) in one of three ways (`--variants`):

  blocking   time.sleep(L) in a sync node (a sync model SDK)
  awaited    await asyncio.sleep(L) in an async node (an async model SDK)
  streaming  an async node streaming a fake chat model's 20 tokens over L

Targets (`--targets`):

  hitl                 HITL as the README deploys it: daphne + `celery -A hitl worker
                       -Q runs,default` with its defaults + Postgres + Redis
  langgraph-dev        `langgraph dev --n-jobs-per-worker 10` (langgraph-api's production
                       default), in-memory runtime
  aegra                Aegra (`aegra serve`) on Postgres, its defaults
  langgraph-dev-raised `langgraph dev --n-jobs-per-worker <clients>` (concurrency raised)
  aegra-raised         Aegra with its database pools raised for <clients> runs (it runs
                       every run as a task of its event loop; sync nodes in its executor)
  hitl-threads         HITL with the worker started `-P threads -c <clients>` (not in the
                       README; for comparison)

Per row it prints cycles/s, the p50/p99 overhead of a cycle above L (a whole cycle's
time minus L), the model calls in flight on the server (mean and peak, from the
graph's own trace of every call), the peak RSS of the processes that run graphs
(HITL: the Celery worker with its children; a peer: its server), server CPU per
cycle (every server process and the Postgres backends of its database) and errors.
A variant a target cannot run is reported as an error row after one smoke cycle.
`--rounds N` measures every row N times, interleaved (every target in turn per round).

    .venv/bin/python bench/model_bound.py --clients 32 --latency 1 --cycles 64 --targets hitl
    .venv/bin/python bench/model_bound.py                      # everything (long)
    .venv/bin/python bench/model_bound.py --waits 1000         # 1,000 open waits, connections

`--waits N` is another mode: against HITL alone it opens N waits at once (a third
each `runs.wait`, `runs.stream` and `runs.create` + `runs.join`), on runs that queue
behind the worker, and prints the peak number of Postgres sessions of the web process
(from pg_stat_activity, by application_name) next to its pool size, and how many waits
completed with the right answer.

Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAPH_FILE = ROOT / "bench" / "peer_graph.py"
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    BIN,
    CpuSampler,
    System,
    children,
    free_port,
    hitl_prepare,
    install_aegra,
    install_langgraph_dev,
    percentile,
    start_aegra,
    start_langgraph_dev,
)
from bench.peer_servers import (  # noqa: E402
    CACHE,
    clean_env,
    log,
    recreate_database,
    wait_http,
)

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
RESUME = {"resume": [{"type": "accept"}]}
GRAPHS = {v: f"{GRAPH_FILE}:{v}" for v in VARIANTS}


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree(pid: int) -> list[int]:
    pids, stack = [pid], [pid]
    while stack:
        for child in children(stack.pop()):
            pids.append(child)
            stack.append(child)
    return pids


class RssSampler:
    """Peak RSS (sum over each root's process tree, and the largest single process)."""

    def __init__(self, roots: list[int], interval: float = 0.5):
        self.roots, self.interval = roots, interval
        self.peak_total = 0
        self.peak_process = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        sizes = [rss_kb(p) for root in self.roots for p in tree(root)]
        self.peak_total = max(self.peak_total, sum(sizes))
        self.peak_process = max(self.peak_process, max(sizes, default=0))

    def __enter__(self):
        self._sample()

        def loop():
            while not self._stop.wait(self.interval):
                self._sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def in_flight(trace: Path, start: float, end: float) -> tuple[float, int]:
    """Mean and peak number of model calls in flight in [start, end], from the trace."""
    if not trace.exists():
        return float("nan"), 0
    spans = []
    for line in trace.read_text().splitlines():
        with contextlib.suppress(ValueError):
            a, b = (float(x) for x in line.split())
            if b > start and a < end:
                spans.append((max(a, start), min(b, end)))
    if end <= start:
        return float("nan"), 0
    busy = sum(b - a for a, b in spans)
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return busy / (end - start), peak


# --- targets ----------------------------------------------------------------------------


class Target(System):
    """A server of the three graphs; `run_roots` are the processes that run graphs."""

    raised = False

    def __init__(self, args, name: str):
        self.name = name
        super().__init__(args)
        self.trace = self.workdir / "model-trace.log"

    def graph_env(self) -> dict[str, str]:
        return {"BENCH_MODEL_TRACE": str(self.trace)}

    def run_roots(self) -> list[int]:
        return [self.procs[0].pid]

    def concurrency(self) -> int:
        return max(self.args.clients)


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
    def install(self) -> None:
        install_aegra(self)

    @property
    def database(self) -> str:
        return f"{self.args.db_prefix}_aegra"

    @property
    def databases(self) -> list[str]:  # type: ignore[override]
        return [self.database]

    def prepare(self) -> None:
        recreate_database(self.args.pg, self.database)

    def start(self) -> None:
        extra = dict(self.graph_env())
        if self.raised:
            # Aegra runs every run as a task on its event loop (no cap of its own); what
            # bounds it are its two database pools (SQLAlchemy 2, the checkpointer's 6).
            jobs = self.concurrency()
            extra.update(
                SQLALCHEMY_POOL_SIZE=str(max(2, jobs // 4)),
                LANGGRAPH_MAX_POOL_SIZE=str(max(6, jobs // 2)),
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


class HitlTarget(Target):
    """daphne + one Celery worker as README.md's "Running on a host" starts them."""

    worker_args: list[str] = []

    @property
    def database(self) -> str:
        return f"{self.args.db_prefix}_hitl"

    @property
    def databases(self) -> list[str]:  # type: ignore[override]
        return [self.database]

    def env(self, app: str = "") -> dict[str, str]:
        env = clean_env(
            HITL_VAR_DIR=str(self.workdir / "var"),
            HITL_EXTRA_GRAPHS=",".join(f"{v}=bench.peer_graph:{v}" for v in VARIANTS),
            LOG_LEVEL="WARNING",
            DJANGO_SETTINGS_MODULE="hitl.settings",
            PYTHONUNBUFFERED="1",
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

    def prepare(self) -> None:
        import redis

        recreate_database(self.args.pg, self.database)
        redis.Redis.from_url(self.args.redis).flushdb()
        self.api_key = hitl_prepare(self.env(), self.workdir / "token")

    def start(self) -> None:
        port = free_port()
        web, logfile = self.spawn(
            # `-m` so that the code under ROOT is served (a checkout of another commit).
            [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"],
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


# --- driving ----------------------------------------------------------------------------


def new_results() -> dict:
    return {"cycles": [], "done": 0, "errors": 0, "first_error": None, "elapsed": 0.0}


def note_error(results: dict, message: str) -> None:
    results["errors"] += 1
    if results["first_error"] is None:
        results["first_error"] = message[:300]


async def drive(target: Target, variant: str, latency: float, clients: int, cycles: int) -> dict:
    from langgraph_sdk import get_client

    results = new_results()
    claimed = {"n": 0}
    payload = {"request": "bench", "latency": latency}

    async def one(client) -> None:
        while claimed["n"] < cycles:
            claimed["n"] += 1
            try:
                t0 = time.perf_counter()
                thread = await client.threads.create()
                first = await client.runs.wait(thread["thread_id"], variant, input=payload)
                if not (isinstance(first, dict) and first.get("__interrupt__")):
                    note_error(results, f"first half did not pause: {str(first)[:200]}")
                    continue
                last = await client.runs.wait(thread["thread_id"], variant, command=RESUME)
                t1 = time.perf_counter()
                if not (isinstance(last, dict) and last.get("done") is True):
                    note_error(results, f"second half did not finish: {str(last)[:200]}")
                    continue
            except Exception as exc:  # noqa: BLE001 - counted and reported
                note_error(results, f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
                continue
            results["cycles"].append(t1 - t0)
            results["done"] += 1

    sdk_clients = [
        get_client(url=target.base_url, api_key=target.api_key, timeout=600) for _ in range(clients)
    ]
    began = time.perf_counter()
    try:
        await asyncio.gather(*(one(c) for c in sdk_clients))
    finally:
        results["elapsed"] = time.perf_counter() - began
        for c in sdk_clients:
            with contextlib.suppress(Exception):
                await c.aclose()
    return results


def measure(target: Target, variant: str, latency: float, clients: int, cycles: int) -> dict:
    smoke = asyncio.run(drive(target, variant, latency, 1, 1))
    if smoke["errors"]:
        out = new_results()
        out.update(errors=cycles, first_error=smoke["first_error"], smoke_failed=True)
        return out
    wall0 = time.time()
    with (
        CpuSampler(target.cpu_roots(), target.databases, target.args.pg) as cpu,
        RssSampler(target.run_roots()) as rss,
    ):
        results = asyncio.run(drive(target, variant, latency, clients, cycles))
    wall1 = time.time()
    results["cpu_ms"] = sum(cpu.ms_by_category().values())
    results["rss_total_mb"] = rss.peak_total / 1024
    results["rss_process_mb"] = rss.peak_process / 1024
    results["in_flight"] = in_flight(target.trace, wall0, wall1)
    return results


# --- 1,000 waits ----------------------------------------------------------------------


def pool_max(target: HitlTarget) -> tuple[int, int]:
    out = subprocess.run(
        [
            str(BIN / "python"),
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            "print(settings.DATABASES['default']['OPTIONS']['pool']['max_size'], "
            "settings.HITL_CHECKPOINT_POOL_SIZE)",
        ],
        cwd=ROOT,
        env=target.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    django_pool, checkpoint_pool = out.stdout.split()
    return int(django_pool), int(checkpoint_pool)


async def open_waits(target: HitlTarget, n: int, latency: float) -> dict:
    """N waits at once (wait / stream / create+join), each on its own thread's run."""
    import httpx

    headers = {"x-api-key": target.api_key or ""}
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    results = {"ok": 0, "errors": 0, "first_error": None, "by_kind": {}}
    body = {"assistant_id": "blocking", "input": {"request": "waits", "latency": latency}}

    def fail(message: str) -> None:
        results["errors"] += 1
        results["first_error"] = results["first_error"] or message[:300]

    async with httpx.AsyncClient(
        base_url=target.base_url, headers=headers, timeout=900, limits=limits
    ) as http:
        threads = []
        for _ in range(n):  # sequential: the waits, not the creates, are what is measured
            answer = await http.post("/threads", json={})
            answer.raise_for_status()
            threads.append(answer.json()["thread_id"])

        async def wait(thread_id: str) -> None:
            answer = await http.post(f"/threads/{thread_id}/runs/wait", json=body)
            if answer.status_code != 200 or not answer.json().get("__interrupt__"):
                return fail(f"wait {answer.status_code}: {answer.text[:200]}")
            results["ok"] += 1

        async def stream(thread_id: str) -> None:
            saw_interrupt = False
            async with http.stream(
                "POST",
                f"/threads/{thread_id}/runs/stream",
                json={**body, "stream_mode": ["values", "updates"]},
            ) as answer:
                if answer.status_code != 200:
                    await answer.aread()
                    return fail(f"stream {answer.status_code}: {answer.text[:200]}")
                async for line in answer.aiter_lines():
                    if line.startswith("data:") and "__interrupt__" in line:
                        saw_interrupt = True
            if not saw_interrupt:
                return fail("stream ended without the interrupt")
            results["ok"] += 1

        async def join(thread_id: str) -> None:
            created = await http.post(f"/threads/{thread_id}/runs", json=body)
            if created.status_code != 200:
                return fail(f"create {created.status_code}: {created.text[:200]}")
            run_id = created.json()["run_id"]
            answer = await http.get(f"/threads/{thread_id}/runs/{run_id}/join")
            if answer.status_code != 200 or not answer.json().get("__interrupt__"):
                return fail(f"join {answer.status_code}: {answer.text[:200]}")
            results["ok"] += 1

        async def guarded(kind, thread_id: str) -> None:
            try:
                await kind(thread_id)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                fail(f"{kind.__name__}: {type(exc).__name__}: {exc}")

        kinds = (wait, stream, join)
        began = time.perf_counter()
        await asyncio.gather(*(guarded(kinds[i % 3], t) for i, t in enumerate(threads)))
        results["elapsed"] = time.perf_counter() - began
    return results


def waits_mode(args) -> None:
    target = HitlTarget(args, "hitl")
    results: dict = {}
    try:
        target.prepare()
        target.start()
        limit = pool_max(target)
        import psycopg

        peak = {"web": 0, "web-checkpoints": 0, "worker": 0, "samples": 0}
        stop = threading.Event()

        def sample() -> None:
            with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn:
                while not stop.wait(0.1):
                    rows = conn.execute(
                        "select application_name, count(*) from pg_stat_activity "
                        "where datname = %s group by 1",
                        (target.database,),
                    ).fetchall()
                    counts = dict(rows)
                    peak["web"] = max(peak["web"], counts.get("bench-web", 0))
                    peak["web-checkpoints"] = max(
                        peak["web-checkpoints"], counts.get("bench-web-checkpoints", 0)
                    )
                    peak["worker"] = max(peak["worker"], counts.get("bench-worker", 0))
                    peak["samples"] += 1

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        log(f"opening {args.waits} waits (wait / stream / join) on runs of {args.wait_latency}s")
        results = asyncio.run(open_waits(target, args.waits, args.wait_latency))
        stop.set()
        sampler.join()
    finally:
        target.stop()
        if results.get("errors") == 0:
            target.cleanup()
    if results.get("errors"):
        print(f"logs: {target.workdir}")
    print(
        f"\n{args.waits} open waits (a third each runs.wait, runs.stream, runs.create + join), "
        f"runs of {args.wait_latency}s queued behind one worker:"
    )
    print(f"  completed with the interrupt: {results['ok']}, errors: {results['errors']}")
    if results["first_error"]:
        print(f"  first error: {results['first_error']}")
    print(f"  duration: {results.get('elapsed', float('nan')):.1f} s")
    print(
        f"  peak Postgres sessions of the web process: Django's pool {peak['web']} (at most "
        f"{limit[0]}), the checkpointer's {peak['web-checkpoints']} (at most {limit[1]}); "
        f"of the worker: {peak['worker']} ({peak['samples']} samples)"
    )


# --- report -----------------------------------------------------------------------------


def print_table(rows: list[tuple], args) -> None:
    header = (
        f"{'target':<21} {'variant':<9} {'L':>3} {'clients':>7} {'cycles':>6} {'err':>4} "
        f"{'cycles/s':>8} {'ovh p50':>8} {'ovh p99':>8} {'in flight':>10} "
        f"{'worker RSS':>13} {'CPU/cyc':>8}"
    )
    print("\n" + header)
    print("-" * len(header))
    for (name, variant, latency, clients), r in rows:
        if r.get("smoke_failed"):
            print(
                f"{name:<21} {variant:<9} {latency:>3g} {clients:>7} {0:>6} {'ERR':>4}  "
                f"cannot run: {r['first_error'][:90]}"
            )
            continue
        rate = r["done"] / r["elapsed"] if r["elapsed"] else 0.0
        overhead = [(c - latency) * 1000 for c in r["cycles"]]
        mean, peak = r["in_flight"]
        cpu = r["cpu_ms"] / r["done"] if r["done"] else float("nan")
        print(
            f"{name:<21} {variant:<9} {latency:>3g} {clients:>7} {r['done']:>6} {r['errors']:>4} "
            f"{rate:>8.2f} {percentile(overhead, 50):>8.0f} {percentile(overhead, 99):>8.0f} "
            f"{mean:>5.1f}/{peak:<4} {r['rss_total_mb']:>6.0f}/{r['rss_process_mb']:<6.0f} "
            f"{cpu:>8.0f}"
        )
    print(
        "(ovh = a cycle's time minus L, ms; in flight = model calls running on the server, "
        "mean/peak;\n worker RSS = peak MB of the processes that run graphs, all/largest; "
        "CPU/cyc = server ms per cycle incl. Postgres backends)"
    )
    for (name, variant, latency, clients), r in rows:
        if r["errors"] and not r.get("smoke_failed"):
            print(f"{name} {variant} L={latency:g} c={clients}: first error: {r['first_error']}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--targets", default=DEFAULT_TARGETS, help=", ".join(TARGETS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--latency", default="1,5", help="model latencies L in seconds")
    parser.add_argument("--clients", default="32,128")
    parser.add_argument(
        "--cycles", type=int, default=0, help="cycles per row (default: 2 x clients)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure every row this often, interleaved"
    )
    parser.add_argument("--waits", type=int, default=0, help="open N waits against HITL instead")
    parser.add_argument("--wait-latency", type=float, default=0.05)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--db-prefix", default="model_bench", help="databases <prefix>_hitl, …")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--langgraph-cli-spec", default="langgraph-cli[inmem]==0.4.40")
    parser.add_argument("--aegra-spec", default="aegra-cli==0.6.0")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    latencies = [float(x) for x in args.latency.split(",") if x.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    for bad in set(names) - set(TARGETS):
        parser.error(f"unknown target {bad}")
    for bad in set(variants) - set(VARIANTS):
        parser.error(f"unknown variant {bad}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Hundreds of sockets per client count: lift the soft limit (children inherit it).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.waits:
        waits_mode(args)
        return

    log(
        f"{os.cpu_count()} cores; targets {names}; variants {variants}; L {latencies}; "
        f"clients {args.clients}; langgraph {version('langgraph')}"
    )
    targets = [make_target(args, n) for n in names]
    live: list[Target] = []
    rows: list[tuple] = []
    try:
        for target in targets:
            try:
                target.install()
                target.prepare()
                log(f"starting {target.name}")
                target.start()
                live.append(target)
            except Exception as exc:  # noqa: BLE001 - reported, the others go on
                log(f"{target.name} FAILED to start: {exc}")
                target.stop()
        # Interleaved (A, B, A, B): per round every target in turn, so the noise of a
        # busy machine hits all alike.
        for n in range(args.rounds):
            for latency in latencies:
                for clients in args.clients:
                    cycles = args.cycles or 2 * clients
                    for variant in variants:
                        for target in live:
                            r = measure(target, variant, latency, clients, cycles)
                            rows.append(((target.name, variant, latency, clients), r))
                            rate = r["done"] / r["elapsed"] if r["elapsed"] else 0.0
                            log(
                                f"round {n + 1}: {target.name} {variant} L={latency:g} "
                                f"c={clients}: {r['done']} "
                                f"cycles, {rate:.2f}/s, errors {r['errors']}"
                                + (f" ({r['first_error'][:160]})" if r["first_error"] else "")
                            )
    finally:
        for target in targets:
            with contextlib.suppress(Exception):
                target.stop()
            target.cleanup()
    print()
    for target in targets:
        if target.versions:
            print(f"{target.name}: {target.versions}")
    print(f"{os.cpu_count()} cores")
    print_table(rows, args)


if __name__ == "__main__":
    main()
