"""HITL next to its peers, every system driven through the real langgraph_sdk client.

A cycle, the same for every server: `client.threads.create()` ->
`client.runs.wait(thread, "cycle", input=...)` until the graph pauses on its one
interrupt (first half) -> `client.runs.wait(thread, "cycle", command={"resume":
[{"type": "accept"}]})` until it ends (second half). Every system serves the same
graph, bench/peer_graph.py (plan -> review (interrupt) -> act).

Systems (--systems):
  floor          the graph + PostgresSaver in this process, no HTTP (database peers_floor)
  langgraph-dev  `langgraph dev` (langgraph-cli[inmem]), in-memory runtime
  aegra          Aegra (aegra-cli) on Postgres (database aegra_bench), no Docker
  hitl-prod      HITL: 1 daphne + 1 Celery worker (threads x 64, one run engine) + Postgres (hitl_peers)
                 + Redis (db 12)
  hitl-embedded  HITL with no DATABASE_URL/REDIS_URL: SQLite in a temp dir, runs in-process

The peers are installed on first use into their own venvs under bench/.peers/ (pinned
to this venv's langgraph version so all run the same graph runtime); later runs
reuse them. Measurements are interleaved: per round, per client count, every system
in turn, so machine noise hits all alike. After the timed runs, SQL statements per
cycle are counted from the Postgres server log with `log_statement=all` set on the
bench database only (pg_stat_statements is not preloaded on a stock server), on a
freshly restarted server so that every session logs.

    .venv/bin/python bench/peers.py                          # 1, 8, 16 clients, 60 cycles
    .venv/bin/python bench/peers.py --cycles 120 --rounds 2 --clients 1,16 \\
        --systems langgraph-dev,hitl-prod

Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import os
import re
import resource
import signal
import sys
import threading
import time
import uuid
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAPH_FILE = ROOT / "bench" / "peer_graph.py"
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    RESUME,
    Stack,
    System,
    free_port,
    hitl_env,
    hitl_prepare,
    install_aegra,
    install_langgraph_dev,
    new_results,
    note_error,
    percentile,
    run_cycles,
    sdk_cycles,
    start_aegra,
    start_langgraph_dev,
    web_command,
)
from bench.peer_servers import (  # noqa: E402
    CACHE,
    log,
    recreate_database,
    wait_http,
)
from bench.samplers import CpuSampler, pg_sessions  # noqa: E402

SYSTEMS = ["floor", "langgraph-dev", "aegra", "hitl-prod", "hitl-embedded"]
PEERS = ("langgraph-dev", "aegra")
HITL = ("hitl-prod", "hitl-embedded")
ASSISTANT = "cycle"
INPUT = {"request": "bench"}


class Floor(System):
    name = "floor"
    label = "floor: graph + PostgresSaver in-process"
    databases = ["peers_floor"]

    def prepare(self) -> None:
        recreate_database(self.args.pg, "peers_floor")

    def start(self) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from bench.peer_graph import graph

        self.pool = ConnectionPool(
            f"{self.args.pg}/peers_floor",
            min_size=1,
            max_size=max(self.args.clients),
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        saver = PostgresSaver(self.pool)
        saver.setup()
        self.graph = graph.copy(update={"checkpointer": saver})

    def stop(self) -> None:
        if getattr(self, "pool", None) is not None:
            self.pool.close()
            self.pool = None

    def cpu_roots(self) -> dict[str, int]:
        return {}  # this process: measured with getrusage


class LanggraphDev(System):
    name = "langgraph-dev"
    label = "langgraph dev (inmem runtime)"

    def install(self) -> None:
        install_langgraph_dev(self)

    def start(self) -> None:
        graphs = {ASSISTANT: f"{GRAPH_FILE}:graph"}
        start_langgraph_dev(self, graphs, run_dir=CACHE / "langgraph-dev-run")


class Aegra(System):
    name = "aegra"
    label = "Aegra (Postgres)"
    databases = ["aegra_bench"]

    def install(self) -> None:
        install_aegra(self)

    def prepare(self) -> None:
        recreate_database(self.args.pg, "aegra_bench")

    def start(self) -> None:
        graphs = {ASSISTANT: f"{GRAPH_FILE}:graph"}
        start_aegra(self, graphs, run_dir=CACHE / "aegra-run", database="aegra_bench")

    def cpu_roots(self) -> dict[str, int]:
        return {"aegra cli": self.procs[0].pid}  # `aegra serve` runs uvicorn as its child


HITL_GRAPHS = f"{ASSISTANT}=bench.peer_graph:graph"


class HitlProd(System):
    name = "hitl-prod"
    label = "HITL production (daphne + Celery + PG + Redis)"

    @property
    def databases(self) -> list[str]:
        return [self.args.hitl_db]

    def env(self) -> dict[str, str]:
        return hitl_env(
            self.workdir / "var",
            HITL_GRAPHS,
            DATABASE_URL=f"{self.args.pg}/{self.args.hitl_db}",
            REDIS_URL=self.args.redis,
            HITL_EXECUTOR="celery",
        )

    def prepare(self) -> None:
        import redis

        recreate_database(self.args.pg, self.args.hitl_db)
        redis.Redis.from_url(self.args.redis).flushdb()
        self.api_key = hitl_prepare(self.env(), self.workdir / "token")

    def start(self) -> None:
        self.stack = Stack(
            env=self.env(),
            log=self.workdir / "hitl-prod.log",
            web=1,
            workers=1,
            # The README's worker: one process on the threads pool, 64 runs in flight.
            concurrency=64,
            pool="threads",
            name="peers",
        )
        self.procs = list(self.stack.procs)
        self.base_url = f"http://127.0.0.1:{self.stack.ports[0]}/langgraph"
        wait_http(f"{self.base_url}/ok", self.procs[0], 60, self.workdir / "hitl-prod.log")
        time.sleep(2)  # let the Celery worker come up before the first run is queued

    def cpu_roots(self) -> dict[str, int]:
        return {"daphne": self.procs[0].pid, "celery parent": self.procs[1].pid}


class HitlEmbedded(System):
    name = "hitl-embedded"
    label = "HITL embedded (daphne, SQLite, in-process runs)"

    def env(self) -> dict[str, str]:
        return hitl_env(self.workdir / "var", HITL_GRAPHS)

    def prepare(self) -> None:
        self.api_key = hitl_prepare(self.env(), self.workdir / "token")

    def start(self) -> None:
        port = free_port()
        proc, logfile = self.spawn(
            web_command(port),
            cwd=ROOT,
            env=self.env(),
            logname="hitl-embedded.log",
        )
        self.base_url = f"http://127.0.0.1:{port}/langgraph"
        wait_http(f"{self.base_url}/ok", proc, 60, logfile)

    def cpu_roots(self) -> dict[str, int]:
        return {"daphne": self.procs[0].pid}


CLASSES = {cls.name: cls for cls in (Floor, LanggraphDev, Aegra, HitlProd, HitlEmbedded)}


# --- driving --------------------------------------------------------------------------


def drive_floor(system: Floor, clients: int, cycles: int) -> dict:
    from langgraph.types import Command

    results = new_results()
    lock = threading.Lock()

    def one() -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        try:
            t0 = time.perf_counter()
            first = system.graph.invoke(INPUT, config, durability="sync")
            t1 = time.perf_counter()
            last = system.graph.invoke(Command(**RESUME), config, durability="sync")
            t2 = time.perf_counter()
        except Exception as exc:  # noqa: BLE001
            with lock:
                note_error(results, f"{type(exc).__name__}: {exc}")
            return
        with lock:
            if not first.get("__interrupt__") or last.get("done") is not True:
                note_error(results, f"unexpected state: {first!r} / {last!r}"[:300])
                return
            results["half1"].append((t1 - t0) * 1000)
            results["half2"].append((t2 - t1) * 1000)
            results["done"] += 1

    results["elapsed"] = run_cycles(clients, cycles, one)
    return results


def drive(system: System, clients: int, cycles: int) -> dict:
    if isinstance(system, Floor):
        return drive_floor(system, clients, cycles)
    return asyncio.run(
        sdk_cycles(system.base_url, system.api_key, ASSISTANT, INPUT, clients, cycles)
    )


def measure(system: System, clients: int, cycles: int, pg: str) -> dict:
    """One timed measurement with server CPU and new Postgres sessions."""
    sessions_before = pg_sessions(pg, system.databases)
    self_before = resource.getrusage(resource.RUSAGE_SELF)
    with CpuSampler(system.cpu_roots(), system.databases, pg) as sampler:
        results = drive(system, clients, cycles)
    self_after = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.6)  # pg_stat_database is updated when sessions end / stats flush
    results["sessions"] = pg_sessions(pg, system.databases) - sessions_before
    cpu = sampler.ms_by_category()
    this = (
        self_after.ru_utime + self_after.ru_stime - self_before.ru_utime - self_before.ru_stime
    ) * 1000
    # For the floor this process *is* the system; otherwise it is the driving client.
    cpu["this process (graph)" if isinstance(system, Floor) else "bench client"] = this
    results["cpu"] = cpu
    return results


# --- statements -----------------------------------------------------------------------


def postgres_log(pg: str) -> Path | None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        current = conn.execute("select pg_current_logfile()").fetchone()[0]
        data_dir = conn.execute("show data_directory").fetchone()[0]
        major = conn.execute("show server_version_num").fetchone()[0][:2]
    if current:
        path = Path(current) if current.startswith("/") else Path(data_dir) / current
        return path if os.access(path, os.R_OK) else None
    for candidate in sorted(glob.glob(f"/var/log/postgresql/postgresql-{major}-*.log")):
        if os.access(candidate, os.R_OK):
            return Path(candidate)
    return None


_LOGGED = re.compile(r"@(\S+) LOG:  (?:statement|execute [^:]*):\s*(\S+)")


def count_statements(system: System, cycles: int, pg: str, logfile: Path) -> dict:
    """Restart the system with log_statement=all on its database(s); count a few cycles."""
    import psycopg

    def set_logging(on: bool) -> None:
        with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
            for db in system.databases:
                if on:
                    conn.execute(f"alter database \"{db}\" set log_statement = 'all'")
                else:
                    conn.execute(f'alter database "{db}" reset log_statement')

    system.stop()
    set_logging(True)
    try:
        system.start()
        drive(system, 1, 3)  # warm: pools open, graph loaded
        time.sleep(0.5)
        offset = logfile.stat().st_size
        results = drive(system, 1, cycles)
        time.sleep(1.0)
        with logfile.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    finally:
        set_logging(False)
    kinds: dict[str, int] = {}
    for db, verb in _LOGGED.findall(text):
        if db in system.databases:
            verb = verb.upper().rstrip(";")
            kinds[verb] = kinds.get(verb, 0) + 1
    done = max(results["done"], 1)
    total = sum(kinds.values())
    tx = sum(kinds.get(k, 0) for k in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"))
    return {
        "cycles": results["done"],
        "errors": results["errors"],
        "per_cycle": total / done,
        "without_tx_control": (total - tx) / done,
        "by_verb": {k: v / done for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
    }


# --- report ---------------------------------------------------------------------------


def merge(runs: list[dict]) -> dict:
    out = new_results()
    out["cpu"] = {}
    out["sessions"] = 0
    for r in runs:
        out["half1"] += r["half1"]
        out["half2"] += r["half2"]
        out["done"] += r["done"]
        out["errors"] += r["errors"]
        out["elapsed"] += r["elapsed"]
        out["sessions"] += r["sessions"]
        out["first_error"] = out["first_error"] or r["first_error"]
        for k, v in r["cpu"].items():
            out["cpu"][k] = out["cpu"].get(k, 0.0) + v
    return out


def rate(r: dict) -> float:
    return r["done"] / r["elapsed"] if r["elapsed"] else 0.0


def server_cpu(r: dict) -> float:
    """Server-side CPU per cycle: every process of the system, not the bench client."""
    if not r["done"]:
        return float("nan")
    return sum(v for k, v in r["cpu"].items() if k != "bench client") / r["done"]


def print_table(systems: list[System], clients: list[int], merged: dict) -> None:
    header = (
        f"{'system':<15} {'clients':>7} {'cycles':>6} {'err':>4} {'cycles/s':>9} "
        f"{'half1 p50':>10} {'half1 p99':>10} {'half2 p50':>10} {'half2 p99':>10} "
        f"{'CPU ms/cyc':>10} {'vs best peer':>12}"
    )
    print("\n" + header)
    print("-" * len(header))
    for c in clients:
        peers = [rate(merged[(s, c)]) for s in PEERS if (s, c) in merged]
        best = max(peers) if peers else None
        for system in systems:
            r = merged.get((system.name, c))
            if r is None:
                continue
            ratio = ""
            if system.name in HITL and best:
                ratio = f"{rate(r) / best:.2f}x"
            print(
                f"{system.name:<15} {c:>7} {r['done']:>6} {r['errors']:>4} {rate(r):>9.1f} "
                f"{percentile(r['half1'], 50):>10.1f} {percentile(r['half1'], 99):>10.1f} "
                f"{percentile(r['half2'], 50):>10.1f} {percentile(r['half2'], 99):>10.1f} "
                f"{server_cpu(r):>10.0f} {ratio:>12}"
            )
    print("(half1 = threads.create + runs.wait to the interrupt; half2 = runs.wait with the")
    print(" resume Command to the end; ms. CPU ms/cyc = all server processes incl. Postgres")
    print(" backends of its database. vs best peer = cycles/s / max(langgraph-dev, aegra).)")


def print_cpu(systems: list[System], clients: list[int], merged: dict) -> None:
    print("\nServer CPU ms per cycle (from /proc utime+stime), new Postgres sessions per cycle")
    for system in systems:
        for c in clients:
            r = merged.get((system.name, c))
            if r is None or not r["done"]:
                continue
            cpu = {k: v / r["done"] for k, v in r["cpu"].items()}
            client = cpu.pop("bench client", None)
            parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items()))
            line = f"  {system.name:<14} c={c:<3} {parts}  = {sum(cpu.values()):.1f} ms"
            if system.databases:
                line += f"; sessions/cycle {r['sessions'] / r['done']:.2f}"
            if client is not None:
                line += f"  (bench client {client:.1f})"
            print(line)


# --- main -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=60, help="cycles per measurement")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--clients", default="1,8,16", help="comma-separated client counts")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=", ".join(SYSTEMS))
    parser.add_argument("--warmup", type=int, default=8, help="untimed cycles per measurement")
    parser.add_argument(
        "--statement-cycles",
        type=int,
        default=20,
        help="cycles counted with log_statement=all afterwards (0: skip)",
    )
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--hitl-db", default="hitl_peers", help="hitl-prod's database")
    parser.add_argument("--langgraph-cli-spec", default="langgraph-cli[inmem]==0.4.40")
    parser.add_argument("--aegra-spec", default="aegra-cli==0.6.0")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = set(names) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    systems = [CLASSES[n](args) for n in SYSTEMS if n in names]

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log(
        f"{os.cpu_count()} cores; systems {', '.join(s.name for s in systems)}; clients "
        f"{args.clients}; {args.cycles} cycles x {args.rounds} round(s); langgraph "
        f"{version('langgraph')}, langgraph-sdk {version('langgraph-sdk')}"
    )
    started: list[System] = []
    failed: dict[str, str] = {}
    runs: dict[tuple[str, int], list[dict]] = {}
    statements: dict[str, dict] = {}
    try:
        for system in systems:
            try:
                system.install()
                system.prepare()
                log(f"starting {system.name}")
                started.append(system)
                system.start()
                smoke = drive(system, 1, 2)  # full cycles work before anything is timed
                if smoke["errors"]:
                    raise RuntimeError(f"smoke cycles failed: {smoke['first_error']}")
                log(f"{system.name} up{(' at ' + system.base_url) if system.base_url else ''}")
            except Exception as exc:  # noqa: BLE001 - reported, the others go on
                failed[system.name] = f"{type(exc).__name__}: {exc}"
                log(f"{system.name} FAILED to start: {failed[system.name][:2000]}")
                system.stop()
        live = [s for s in systems if s.name not in failed]
        for rnd in range(1, args.rounds + 1):
            for c in args.clients:
                for system in live:
                    drive(system, c, args.warmup)
                    r = measure(system, c, args.cycles, args.pg)
                    runs.setdefault((system.name, c), []).append(r)
                    log(
                        f"round {rnd}/{args.rounds} c={c:<2} {system.name:<13} {r['done']} cycles "
                        f"in {r['elapsed']:.1f}s = {rate(r):.1f}/s, half1 p50 "
                        f"{percentile(r['half1'], 50):.0f} ms, half2 p50 "
                        f"{percentile(r['half2'], 50):.0f} ms, errors {r['errors']}"
                        + (f" (first: {r['first_error']})" if r["first_error"] else "")
                    )
        if args.statement_cycles:
            logfile = postgres_log(args.pg)
            if logfile is None:
                log("no readable Postgres server log: statements per cycle not counted")
            for system in live:
                if logfile is None or not system.databases:
                    continue
                log(f"counting statements: {system.name}, {args.statement_cycles} cycles")
                try:
                    statements[system.name] = count_statements(
                        system, args.statement_cycles, args.pg, logfile
                    )
                except Exception as exc:  # noqa: BLE001
                    log(f"statement count failed for {system.name}: {exc}")
    finally:
        for system in started:
            with contextlib.suppress(Exception):
                system.stop()
            system.cleanup()

    merged = {key: merge(value) for key, value in runs.items()}
    print()
    for system in systems:
        if system.versions:
            print(f"{system.name}: {system.versions}")
    print(f"\n{os.cpu_count()} cores; {args.cycles} cycles per measurement, {args.rounds} round(s)")
    print_table(systems, args.clients, merged)
    print_cpu(systems, args.clients, merged)
    if statements:
        print("\nSQL statements per cycle (server log, log_statement=all, 1 client)")
        for name, s in statements.items():
            verbs = ", ".join(f"{k} {v:.1f}" for k, v in list(s["by_verb"].items())[:8])
            print(
                f"  {name:<14} {s['per_cycle']:.1f} ({s['without_tx_control']:.1f} without "
                f"BEGIN/COMMIT/SAVEPOINT) over {s['cycles']} cycles: {verbs}"
            )
    for name, why in failed.items():
        print(f"\n{name} did not run: {why[:1000]}")
    for key, r in sorted(merged.items()):
        if r["errors"]:
            print(f"{key[0]} c={key[1]}: {r['errors']} errors; first: {r['first_error']}")


if __name__ == "__main__":
    main()
