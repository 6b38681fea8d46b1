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
import sys
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import new_results, percentile, sdk_cycles  # noqa: E402
from bench.model_targets import (  # noqa: E402
    DEFAULT_TARGETS,
    TARGETS,
    VARIANTS,
    Target,
    make_target,
)
from bench.model_waits import waits_mode  # noqa: E402
from bench.peer_servers import log  # noqa: E402
from bench.samplers import CpuSampler, RssSampler  # noqa: E402


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


# --- driving ----------------------------------------------------------------------------


def drive(target: Target, variant: str, latency: float, clients: int, cycles: int) -> dict:
    """The cycles, each with its whole time in seconds under "cycles"."""
    payload = {"request": "bench", "latency": latency}
    results = asyncio.run(
        sdk_cycles(target.base_url, target.api_key, variant, payload, clients, cycles, 600)
    )
    results["cycles"] = [
        (a + b) / 1000 for a, b in zip(results["half1"], results["half2"], strict=True)
    ]
    return results


def measure(target: Target, variant: str, latency: float, clients: int, cycles: int) -> dict:
    smoke = drive(target, variant, latency, 1, 1)
    if smoke["errors"]:
        out = new_results()
        out.update(errors=cycles, first_error=smoke["first_error"], smoke_failed=True)
        return out
    wall0 = time.time()
    with (
        CpuSampler(target.cpu_roots(), target.databases, target.args.pg) as cpu,
        RssSampler(target.run_roots()) as rss,
    ):
        results = drive(target, variant, latency, clients, cycles)
    wall1 = time.time()
    results["cpu_by"] = cpu.ms_by_category()
    results["cpu_ms"] = sum(results["cpu_by"].values())
    results["rss_total_mb"] = rss.peak_total / 1024
    results["rss_process_mb"] = rss.peak_process / 1024
    results["in_flight"] = in_flight(target.trace, wall0, wall1)
    return results


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
    print("\nServer CPU ms per cycle, by process:")
    for (name, variant, latency, clients), r in rows:
        if r.get("smoke_failed") or not r["done"]:
            continue
        parts = ", ".join(
            f"{label} {ms / r['done']:.1f}" for label, ms in sorted(r["cpu_by"].items())
        )
        print(f"  {name} {variant} L={latency:g} c={clients}: {parts}")
    for (name, variant, latency, clients), r in rows:
        if r["errors"] and not r.get("smoke_failed"):
            print(f"{name} {variant} L={latency:g} c={clients}: first error: {r['first_error']}")


def free_sessions(pg: str) -> int:
    """Sessions the Postgres server can still open for ordinary users."""
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        return conn.execute(
            "SELECT current_setting('max_connections')::int"
            " - current_setting('superuser_reserved_connections')::int"
            " - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        ).fetchone()[0]


def fit_the_database(pg: str, targets: list[Target]) -> None:
    """Every target stays up for the whole run: their pools must fit the server together.

    A raised Aegra's pools shrink to what is left; otherwise the run stops here with the
    arithmetic, instead of rows of "too many clients" errors half-way through.
    """
    free = free_sessions(pg) - 5  # this benchmark's own sessions, and a margin
    fixed = sum(t.db_sessions() for t in targets if not (t.raised and hasattr(t, "pools")))
    for target in targets:
        if target.raised and hasattr(target, "raise_pools"):
            target.raise_pools(free - fixed)
    wanted = {t.name: t.db_sessions() for t in targets if t.db_sessions()}
    if sum(wanted.values()) > free:
        sys.exit(
            f"Postgres can open {free} more sessions, and these targets' pools may hold "
            f"{sum(wanted.values())} ({wanted}). Measure fewer targets at a time "
            "(--targets), or raise max_connections."
        )
    if wanted:
        log(f"Postgres sessions: {free} free; the targets' pools may hold {wanted}")


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
    fit_the_database(args.pg, targets)
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
