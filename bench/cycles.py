"""Full HITL cycles through the running stack, next to the in-process LangGraph floor.

A cycle: start a thread -> the interrupt row exists -> post a decision -> the run
finished. It starts its own stack (daphne web processes + Celery workers) on a
benchmark database and Redis db, drives it with N concurrent HTTP clients, and runs
the same graph in-process on LangGraph + PostgresSaver (no web, no queue) as the floor.

    .venv/bin/python bench/cycles.py --clients 16 --cycles 480

Prints figures; it is not a test and asserts nothing but that cycles completed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    Stack,
    ensure_database,
    percentile,
    run_cycles,
)


def bar(label: str, value: float, scale: float, width: int = 40) -> str:
    filled = int(round(min(value / scale, 1.0) * width)) if scale else 0
    return f"  {label:<34} {'#' * filled}{'.' * (width - filled)} {value:8.1f}"


# --- stack ---------------------------------------------------------------------------


def prepare(database_url: str, redis_url: str) -> str:
    """Migrate the bench database, flush the bench Redis db, return an API token."""
    import redis

    ensure_database(database_url)
    redis.Redis.from_url(redis_url).flushdb()
    env = stack_env(database_url, redis_url)
    subprocess.run(
        [str(BIN / "python"), "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
    )
    token_file = ROOT / "var" / "bench-token"
    token_file.parent.mkdir(exist_ok=True)
    subprocess.run(
        [
            str(BIN / "python"),
            "manage.py",
            "demo_setup",
            "--username",
            "bench",
            "--token-file",
            str(token_file),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return token_file.read_text().strip()


def stack_env(database_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        HITL_EXECUTOR="celery",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="hitl.settings",
    )
    return env


# --- clients -------------------------------------------------------------------------


async def client_loop(base_urls, token, graph, deadline_cycles, counter, results, index):
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    base = base_urls[index % len(base_urls)]
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        while True:
            if counter["next"] >= deadline_cycles:
                return
            counter["next"] += 1
            t0 = time.perf_counter()
            started = (
                await http.post(
                    "/api/v1/threads", json={"graph": graph, "input": {"request": "bench"}}
                )
            ).json()
            thread_id = started["thread_id"]
            thread = (
                await http.get(
                    f"/api/v1/threads/{thread_id}/wait", params={"status": "interrupted,error"}
                )
            ).json()
            t1 = time.perf_counter()
            if thread["status"] != "interrupted" or not thread["interrupts"]:
                results["errors"] += 1
                continue
            interrupt_id = thread["interrupts"][0]["id"]
            t2 = time.perf_counter()
            answer = await http.post(
                f"/api/v1/interrupts/{interrupt_id}/decision", json={"type": "accept"}
            )
            if answer.status_code != 200:
                results["errors"] += 1
                continue
            done = (
                await http.get(f"/api/v1/threads/{thread_id}/wait", params={"status": "done,error"})
            ).json()
            t3 = time.perf_counter()
            if done["status"] != "done":
                results["errors"] += 1
                continue
            results["start_to_interrupt"].append((t1 - t0) * 1000)
            results["decision_to_finished"].append((t3 - t2) * 1000)
            results["cycle"].append((t3 - t0) * 1000)


async def drive(base_urls, token, graph, clients, cycles):
    results = {"start_to_interrupt": [], "decision_to_finished": [], "cycle": [], "errors": 0}
    counter = {"next": 0}
    began = time.perf_counter()
    await asyncio.gather(
        *(client_loop(base_urls, token, graph, cycles, counter, results, i) for i in range(clients))
    )
    results["elapsed"] = time.perf_counter() - began
    return results


# --- floor ---------------------------------------------------------------------------


def floor(database_url: str, clients: int, cycles: int) -> dict:
    """The same graph in-process on LangGraph + PostgresSaver: no web, no queue, no Django."""
    from langgraph.types import Command

    from agents.checkpoint import get_checkpointer
    from agents.graphs.examples import approval_graph
    from agents.registry import with_checkpointer

    graph = with_checkpointer(approval_graph, get_checkpointer(database_url, clients))
    results = {"start_to_interrupt": [], "decision_to_finished": [], "cycle": [], "errors": 0}
    lock = threading.Lock()

    def one() -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        t0 = time.perf_counter()
        for _ in graph.stream(
            {"request": "bench"}, config, stream_mode=["updates", "messages"], durability="sync"
        ):
            pass
        interrupt_id = graph.get_state(config).interrupts[0].id
        t1 = time.perf_counter()
        resume = Command(resume={interrupt_id: {"type": "accept", "args": None}})
        for _ in graph.stream(
            resume, config, stream_mode=["updates", "messages"], durability="sync"
        ):
            pass
        graph.get_state(config)
        t2 = time.perf_counter()
        with lock:
            results["start_to_interrupt"].append((t1 - t0) * 1000)
            results["decision_to_finished"].append((t2 - t1) * 1000)
            results["cycle"].append((t2 - t0) * 1000)

    results["elapsed"] = run_cycles(clients, cycles, one)
    return results


def report(name: str, results: dict) -> float:
    n = len(results["cycle"])
    rate = n / results["elapsed"] if results["elapsed"] else 0.0
    print(f"\n{name}: {n} cycles in {results['elapsed']:.1f}s, {results['errors']} errors")
    print(f"  cycles/s                           {rate:8.1f}")
    for key in ("start_to_interrupt", "decision_to_finished", "cycle"):
        values = results[key]
        print(
            f"  {key:<22} p50 {percentile(values, 50):7.1f} ms   p99 {percentile(values, 99):7.1f} ms"
            f"   mean {statistics.fmean(values) if values else float('nan'):7.1f} ms"
        )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--cycles", type=int, default=480)
    parser.add_argument("--warmup", type=int, default=32)
    parser.add_argument(
        "--web", type=int, default=2, help="daphne processes (clients spread over them)"
    )
    parser.add_argument("--workers", type=int, default=1, help="Celery worker processes")
    parser.add_argument("--concurrency", type=int, default=4, help="children per Celery worker")
    parser.add_argument("--pool", default="prefork")
    parser.add_argument("--graph", default="approval")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/hitl_bench")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--skip-floor", action="store_true")
    parser.add_argument("--skip-stack", action="store_true")
    args = parser.parse_args()

    print(
        f"{os.cpu_count()} cores; {args.clients} clients; {args.cycles} cycles; graph {args.graph!r}"
    )
    rates = {}
    if not args.skip_stack:
        token = prepare(args.database_url, args.redis_url)
        stack = Stack(
            env=stack_env(args.database_url, args.redis_url),
            log=ROOT / "var" / "bench-stack.log",
            web=args.web,
            workers=args.workers,
            concurrency=args.concurrency,
            pool=args.pool,
        )
        print(
            f"stack: {args.web} daphne, {args.workers} worker(s) x {args.concurrency} ({args.pool})"
        )
        try:
            urls = [f"http://127.0.0.1:{port}" for port in stack.ports]
            asyncio.run(drive(urls, token, args.graph, args.clients, args.warmup))
            rates["HITL stack (web + queue + workers)"] = report(
                "HITL stack", asyncio.run(drive(urls, token, args.graph, args.clients, args.cycles))
            )
        finally:
            stack.stop()
    if not args.skip_floor:
        floor(args.database_url, args.clients, args.warmup)
        rates["floor (in-process LangGraph)"] = report(
            "floor: LangGraph + PostgresSaver in-process",
            floor(args.database_url, args.clients, args.cycles),
        )
    print("\ncycles/s")
    scale = max(rates.values()) if rates else 1
    for label, rate in rates.items():
        print(bar(label, rate, scale))


if __name__ == "__main__":
    main()
