"""HITL under faults: SIGKILLed workers, dropped database sessions, Redis down, under load.

For every scenario a fresh production layout is started: 1 daphne, 2 Celery workers
(prefork x 2 each), celery beat, Postgres database `hitl_faults` (recreated, then
migrated) and a private redis-server on a free port, without persistence, started by
this script (REDIS_URL points at it; so the Redis scenario can stop and restart it).
Default HITL settings (lease 6 s, reaper every 2 s, re-dispatch after 20 s).

Load: N concurrent langgraph_sdk clients (default 8) run M cycles in all (default 150)
against <daphne>/langgraph with an API token, like bench/peers.py:
`threads.create()` -> `runs.wait(input=...)` to the interrupt -> `runs.wait(
command={"resume": [{"type": "accept"}]})` to the end, on the graph
bench/fault_graph.py (plan -> review -> act), whose `plan` and `act` nodes append the
thread id to files in HITL_FAULT_DIR so repeated executions can be counted.

Clients honour 503 + Retry-After and try again (with `--stock-client` they do not, as
langgraph_sdk itself does not: every 503 is then a client-visible error). A `runs.wait` that got a 503 may have
created its run before the fault hit (the 503 came from waiting on it): before
repeating the POST the client lists the thread's runs and joins the new run if there
is one, as a careful client would (a blind re-POST would earn a 409). Any other HTTP
error or exception is a client error and the cycle is dropped (not ok).

Faults start ~2 s into the load, in a background thread:
  kill      8 SIGKILLs, one every 2.5 s, alternating a random prefork child of a random
            worker and a whole worker (its process group); a killed worker is started
            again after ~1 s, as a supervisor would
  pg        pg_terminate_backend() on every session of hitl_faults, 5 times over 18 s
  redis     the private redis-server stopped, 10 s later started again (empty)
  baseline  no fault
  roll      a rolling restart: 2 daphne behind a balancer (bench/balancer.py; clients send
            `Connection: close` so each request is balanced), 2 workers on the threads
            pool (the README's worker, 64 runs each) and a model-bound `plan` (a blocking
            call of --latency s, default 1). Each web process is drained at the balancer
            until its open requests have begun their answers, then SIGTERMed and started
            again; then each worker is SIGTERMed (it finishes what it holds) and started
            again. Prints, per process, how long it took and how long a worker lingered
            after its last run ended.

After the load (stragglers are given up 120 s after the last cycle began), and once
the fault schedule is over, the script waits up to 60 s for active runs to settle,
then counts from the database and from the graph's effect files: runs failed (status
error), stuck (threads busy or runs queued/running after those 60 s), threads done
without their review (done, but their interrupt rows are not all resolved),
answered interrupts whose thread did not finish, threads whose `act` / `plan` ran
more than once.

    .venv/bin/python bench/faults.py                       # all four scenarios
    .venv/bin/python bench/faults.py --scenarios pg,baseline --clients 8 --cycles 150
    .venv/bin/python bench/faults.py --scenarios roll --clients 32 --cycles 1200

Logs (daphne, workers, beat) and per-scenario details stay in a temp dir printed at
the start. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import percentile  # noqa: E402
from bench.fault_census import log_summary, measure, settle  # noqa: E402
from bench.fault_load import Load, drive  # noqa: E402
from bench.fault_stack import FAULTS, SCENARIOS, FaultStack  # noqa: E402
from bench.peer_servers import log  # noqa: E402

# --- one scenario ------------------------------------------------------------------------


def run_scenario(name: str, args, root: Path) -> dict:
    workdir = root / name
    workdir.mkdir(parents=True)
    log(f"=== {name}: {SCENARIOS[name]} (logs: {workdir})")
    if name == "roll":
        stack = FaultStack(
            workdir,
            args.pg,
            args.db,
            concurrency=64,
            web=2,
            pool="threads",
            HITL_FAULT_LATENCY=str(args.latency),
        )
    else:
        stack = FaultStack(workdir, args.pg, args.db)
    abort = threading.Event()
    events: list[str] = []
    try:
        stack.start()
        log(
            f"{name}: stack up (daphne :{stack.port}, workers "
            f"{[p.pid for p in stack.workers]}, redis :{stack.redis_port}); "
            f"{args.clients} clients x {args.cycles} cycles"
        )
        fault_done = {"at": None, "error": None}

        def fault_thread() -> None:
            if abort.wait(args.fault_delay):
                return
            try:
                FAULTS[name](stack, abort, events)
            except Exception as exc:  # noqa: BLE001 - reported
                fault_done["error"] = f"{type(exc).__name__}: {exc}"
                log(f"fault injection failed: {fault_done['error']}")
            fault_done["at"] = time.monotonic()

        injector = threading.Thread(target=fault_thread, daemon=True)
        began = time.monotonic()
        injector.start()
        load = asyncio.run(
            drive(
                stack.base_url,
                stack.token,
                args.clients,
                args.cycles,
                args.straggle,
                args.naive_retry,
                args.stock_client,
                # Each request balanced on its own, as behind an HTTP balancer.
                {"Connection": "close"} if stack.balancer is not None else None,
            )
        )
        load_end = time.monotonic()
        log(
            f"{name}: load over in {load.elapsed:.1f}s: ok {load.ok}/{args.cycles}, client errors "
            f"{load.client_errors} {dict(load.errors)}, 503 retries {load.retries_503}"
        )
        injector.join(timeout=120)
        if injector.is_alive():
            abort.set()
            injector.join(timeout=30)
        quiet_since = max(load_end, fault_done["at"] or load_end)
        left = settle(stack.database_url, args.settle - (time.monotonic() - quiet_since))
        log(f"{name}: {left} threads still active (waited up to {args.settle:.0f} s); measuring")
        result = measure(stack.database_url, stack.effects)
        result["roll"] = stack.roll
        result["refused"] = stack.balancer.refused if stack.balancer is not None else 0
    finally:
        abort.set()
        stack.stop()
    result.update(
        scenario=name,
        load=load,
        events=events,
        fault_error=fault_done["error"],
        fault_span=(fault_done["at"] - began) if fault_done["at"] else None,
        logs=log_summary(workdir),
        workdir=str(workdir),
    )
    dump = {k: v for k, v in result.items() if k != "load"}
    dump["load"] = {
        k: (dict(v) if isinstance(v, collections.Counter) else v)
        for k, v in load.__dict__.items()
        if k not in ("threads", "half1", "half2")
    }
    (workdir / "result.json").write_text(json.dumps(dump, indent=2, default=str))
    return result


# --- report ------------------------------------------------------------------------------


def print_report(results: list[dict], args) -> None:
    header = (
        "| fault during the load | cycles ok | client errors (of which 500s) | 503 answers "
        "| runs failed "
        "| stuck | done without review | answered, not finished | repeated act "
        "| repeated plan | duration |"
    )
    print("\n" + header)
    print("|" + "---|" * header.count(" |"))
    for r in results:
        load: Load = r["load"]
        print(
            f"| {SCENARIOS[r['scenario']]} | {load.ok}/{load.cycles} | {load.client_errors} "
            f"({load.statuses.get(500, 0)}) | {sum(load.bodies_503.values())} "
            f"| {len(r['failed_runs'])} | {len(r['stuck'])} "
            f"| {len(r['done_unreviewed'])} | {len(r['answered_unfinished'])} "
            f"| {len(r['repeated_act'])} | {len(r['repeated_plan'])} | {load.elapsed:.1f} s |"
        )
    print(
        f"\n{os.cpu_count()} cores; {args.clients} langgraph_sdk clients, {args.cycles} cycles "
        "per scenario; 1 daphne, 2 Celery workers x 2 prefork children, beat, private Redis "
        "(roll: 2 daphne behind a balancer, 2 workers on the threads pool x 64)."
    )
    print(
        "duration = from the first cycle to the last answer (or giving up); repeated act / "
        "plan = threads whose node appended its line more than once."
    )
    for r in results:
        if r.get("roll"):
            print_roll(r)
    for r in results:
        load = r["load"]
        print(f"\n--- {r['scenario']}: {SCENARIOS[r['scenario']]}  (logs: {r['workdir']})")
        if r["events"]:
            print("  faults: " + "; ".join(r["events"]))
        if r["fault_error"]:
            print(f"  fault injection failed: {r['fault_error']}")
        print(
            f"  cycles/s {load.ok / load.elapsed if load.elapsed else 0:.1f}; half1 p50/p99 "
            f"{percentile(load.half1, 50):.0f}/{percentile(load.half1, 99):.0f} ms, half2 p50/p99 "
            f"{percentile(load.half2, 50):.0f}/{percentile(load.half2, 99):.0f} ms"
        )
        print(
            f"  503 answers retried {load.retries_503} (of which joined an already created run "
            f"{load.joined_after_503}); HTTP error statuses {dict(load.statuses)}"
        )
        for kind, n in load.errors.most_common():
            print(f"  client error {kind}: {n}; first: {load.first_errors.get(kind, '')}")
        print(f"  threads {r['thread_status']}; runs {r['run_status']}; attempts {r['attempts']}")
        print(f"  audit {r['audit']}")
        print(
            f"  effect lines: plan {r['plan_lines']}, act {r['act_lines']}; act without a resolved "
            f"interrupt {len(r['act_unreviewed'])}; done without an act line "
            f"{len(r['done_without_act'])}; threads with >1 interrupt row "
            f"{len(r['extra_interrupt_rows'])}"
        )
        for label in ("stuck", "done_unreviewed", "answered_unfinished", "repeated_act"):
            if r[label]:
                print(f"  {label}: {', '.join(r[label][:6])}{' ...' if len(r[label]) > 6 else ''}")
        for run in r["failed_runs"][:3]:
            err = (run["error"] or "").strip().splitlines()
            print(
                f"  failed run {run['id']} ({run['kind']}, attempts {run['attempts']}): "
                f"{err[-1] if err else ''}"
            )
        for body, n in load.bodies_503.most_common():
            print(f"  503 x{n}: {body}")
        for name, summary in r["logs"].items():
            print(f"  {name}: {summary['counts']}")
            for line in summary["first"][: args.excerpts]:
                print(f"      {line[:300]}")


def print_roll(r: dict) -> None:
    print(f"\nRolling restart, per process in order ({r['refused']} connections refused):")
    print("| process | drained in | stopped in | answers cut | exit after last run | back after |")
    print("|---|---|---|---|---|---|")
    for p in r["roll"]:
        lag = p.get("exit_after_last_run_s")
        print(
            f"| {p['process']} | {p.get('drain_s', 0):.2f} s | {p['stop_s']:.2f} s "
            f"| {p.get('open_at_stop', '-')} | {'-' if lag is None else f'{lag:.2f} s'} "
            f"| {p['back_s']:.1f} s |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=", ".join(SCENARIOS))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=150)
    parser.add_argument("--fault-delay", type=float, default=2.0, help="s after the load starts")
    parser.add_argument("--straggle", type=float, default=120.0, help="s to wait for stragglers")
    parser.add_argument("--settle", type=float, default=60.0, help="s before counting stuck runs")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--db", default="hitl_faults", help="the database (dropped and recreated)")
    parser.add_argument("--keep-db", action="store_true", help="leave the database behind")
    parser.add_argument(
        "--stock-client",
        action="store_true",
        help="clients do not retry a 503 (as langgraph_sdk does not): each is an error",
    )
    parser.add_argument(
        "--latency", type=float, default=1.0, help="roll: s the plan node's model call takes"
    )
    parser.add_argument("--excerpts", type=int, default=4, help="log lines shown per log file")
    parser.add_argument(
        "--naive-retry",
        action="store_true",
        help="after a 503 on runs.wait, POST again without checking for a created run",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="hitl-faults-"))
    log(f"{os.cpu_count()} cores; scenarios {', '.join(names)}; logs under {root}")
    results = []
    failed: dict[str, str] = {}
    try:
        for name in names:
            try:
                results.append(run_scenario(name, args, root))
            except Exception as exc:  # noqa: BLE001 - reported; the other scenarios go on
                failed[name] = f"{type(exc).__name__}: {exc}"
                log(f"{name} FAILED: {failed[name][:2000]}")
    finally:
        if not args.keep_db:
            import psycopg

            with (
                contextlib.suppress(Exception),
                psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn,
            ):
                conn.execute(f'drop database if exists "{args.db}" with (force)')
    print_report(results, args)
    for name, why in failed.items():
        print(f"\n{name} did not run to the end: {why[:1000]}")
    print(f"\nLogs and per-scenario result.json: {root}")


if __name__ == "__main__":
    main()
