"""What one hand-off to a Celery worker costs this stack, with nothing else in it.

A run reaches a worker as a Celery task and its end comes back to the web process over
Redis. This sends a task that does nothing but announce its end, with HITL's Celery app
and settings (late ack, prefetch 1, the worker's flags and transport as
bench/peers.py's `hitl-prod` runs them), and waits to hear it: one PUBLISH to a
channel the sender subscribed to, as a run's end reaches its waiters. It prints the CPU
of the sender, the worker and redis-server per hand-off (from /proc), and hand-offs per
second. A review cycle has two; bench/peers.py's figures per cycle can be read beside
it (docs/benchmarks.md, "What this stack cannot drop").

    .venv/bin/python bench/handoff.py --hops 2000 --clients 1,8

Prints figures; it is not a test. Uses Redis db 12 (bench/peers.py's) and no database:
the worker's settings are the embedded ones, with a Redis broker.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TASK = "bench.handoff.noop"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import celery_worker_command  # noqa: E402
from bench.samplers import TICK_MS, proc_stat  # noqa: E402
from hitl.celery import app  # noqa: E402


@app.task(name=TASK, ignore_result=True)
def noop(channel: str) -> None:
    """The worker's side: announce the end, as a run's end is announced."""
    from hitl.core.live import redis as live_redis

    live_redis.client().publish(channel, "1")


def cpu_ms(pid: int) -> float:
    stat = proc_stat(pid)
    if stat is None:
        raise SystemExit(f"process {pid} is gone")
    return stat[0] * TICK_MS


def redis_pid() -> int:
    found = subprocess.run(["pgrep", "-x", "redis-server"], capture_output=True, text=True)
    pids = found.stdout.split()
    if len(pids) != 1:
        raise SystemExit(f"expected one redis-server process, found {pids or 'none'}")
    return int(pids[0])


def client_loop(hops: int, done: list[int]) -> None:
    from hitl.core.live import redis as live_redis

    channel = f"bench:handoff:{uuid.uuid4().hex}"
    pubsub = live_redis.client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel)
    try:
        for _ in range(hops):
            app.send_task(
                TASK,
                args=[channel],
                queue="runs",
                retry=False,
                argsrepr="[]",
                kwargsrepr="{}",
                declare=[],
            )
            while pubsub.get_message(timeout=30) is None:
                pass
            done.append(1)
    finally:
        pubsub.close()


def measure(clients: int, hops: int, worker: int, redis: int) -> dict[str, float]:
    per_client = max(1, hops // clients)
    warm: list[int] = []
    client_loop(50, warm)
    done: list[int] = []
    threads = [
        threading.Thread(target=client_loop, args=(per_client, done)) for _ in range(clients)
    ]
    me = os.getpid()
    before = {
        name: cpu_ms(pid) for name, pid in (("client", me), ("worker", worker), ("redis", redis))
    }
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    n = len(done)
    figures = {
        name: (cpu_ms(pid) - before[name]) / n
        for name, pid in (("client", me), ("worker", worker), ("redis", redis))
    }
    figures["per_s"] = n / elapsed
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hops", type=int, default=2000, help="hand-offs per measurement")
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as var_dir:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HITL_", "DATABASE_URL"))}
        env.update(
            HITL_VAR_DIR=var_dir,
            REDIS_URL=args.redis,
            DJANGO_SETTINGS_MODULE="hitl.settings",
            PYTHONPATH=str(ROOT),
            LOG_LEVEL="WARNING",
        )
        os.environ.update(env)
        os.environ.pop("DATABASE_URL", None)
        import django

        django.setup()
        from hitl.core.live import redis as live_redis

        live_redis.client().flushdb()
        command = celery_worker_command("handoff@%h", concurrency=64, pool="threads")
        worker = subprocess.Popen(
            [*command[:3], "worker", "-I", "bench.handoff", *command[4:]],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            warm: list[int] = []
            client_loop(1, warm)  # waits for the worker to take its first task
            redis = redis_pid()
            print(f"{os.cpu_count()} cores; {args.hops} hand-offs per measurement")
            print(f"{'clients':>7} {'hops/s':>8} {'client ms':>10} {'worker ms':>10} "
                  f"{'redis ms':>9} {'all ms':>7}")  # fmt: skip
            for _ in range(args.rounds):
                for clients in [int(c) for c in args.clients.split(",")]:
                    f = measure(clients, args.hops, worker.pid, redis)
                    total = f["client"] + f["worker"] + f["redis"]
                    print(
                        f"{clients:>7} {f['per_s']:>8.1f} {f['client']:>10.2f} "
                        f"{f['worker']:>10.2f} {f['redis']:>9.2f} {total:>7.2f}",
                        flush=True,
                    )
        finally:
            worker.terminate()
            worker.wait(30)


if __name__ == "__main__":
    main()
