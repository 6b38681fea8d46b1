"""Push latency: from an interrupt's creation on a worker to its arrival in reviewers' browsers.

Starts daphne (Redis channel layer) and a Celery worker on a benchmark database,
connects N reviewer WebSocket clients to /ws/inbox/ (real sessions, same-origin),
starts runs of the approval graph through the service layer, and measures for every
client and every interrupt: HumanInterrupt.created_at (set in the worker, before its
transaction commits) -> the interrupt.changed message received by the client.

    .venv/bin/python bench/push_latency.py --clients 200 --interrupts 40
    .venv/bin/python bench/push_latency.py --layer redis-pubsub --web 2

Prints figures (p50/p99/max, deliveries); not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    Stack,
    ensure_database,
    percentile,
)


def stack_env(args) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=args.database_url,
        REDIS_URL=args.redis_url,
        HITL_EXECUTOR="celery",
        HITL_CHANNEL_LAYER=args.layer,
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="hitl.settings",
    )
    return env


def setup_django(args) -> None:
    os.environ.update(stack_env(args))
    import django

    django.setup()


def make_reviewers(count: int) -> list[str]:
    """`count` reviewers in the default group, each with a live session; returns cookies."""
    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.auth.hashers import make_password
    from django.contrib.sessions.backends.db import SessionStore

    from hitl.core.access.permissions import default_reviewer_group

    User = get_user_model()
    group = default_reviewer_group()
    names = [f"bench-reviewer-{i:04d}" for i in range(count)]
    existing = set(User.objects.filter(username__in=names).values_list("username", flat=True))
    unusable = make_password(None)  # no password hashing per user: sessions are made directly
    User.objects.bulk_create(
        [User(username=n, password=unusable) for n in names if n not in existing]
    )
    users = list(User.objects.filter(username__in=names).order_by("username"))
    group.user_set.add(*users)
    cookies = []
    for user in users:
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        cookies.append(f"{settings.SESSION_COOKIE_NAME}={session.session_key}")
    return cookies


async def client(url: str, cookie: str, origin: str, ready: asyncio.Event, received: list, counts):
    from websockets.asyncio.client import connect

    async with connect(
        url,
        additional_headers={"Cookie": cookie},
        origin=origin,
        open_timeout=60,
        max_size=None,
        compression=None,
    ) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
        counts["connected"] += 1
        if counts["connected"] == counts["expected"]:
            ready.set()
        async for raw in ws:
            now = time.time()
            message = json.loads(raw)
            if message.get("type") == "interrupt.changed" and message.get("status") == "pending":
                received.append((message["interrupt_id"], now))


def start_runs(count: int, interval: float) -> list[str]:
    """Start `count` runs one by one; the worker turns each into a pending interrupt."""
    from django.contrib.auth import get_user_model

    from hitl.core.runs import run_start

    starter = get_user_model().objects.get_or_create(username="bench-requester")[0]
    runs = []
    for i in range(count):
        run = run_start(
            graph="approval", input={"request": f"push {i}"}, user=starter, title=f"push {i}"
        )
        runs.append(str(run.pk))
        time.sleep(interval)
    return runs


async def measure(args, cookies: list[str], ports: list[int]) -> None:
    from asgiref.sync import sync_to_async

    from hitl.core.models import HumanInterrupt

    ready = asyncio.Event()
    received: list[tuple[str, float]] = []
    counts = {"connected": 0, "expected": len(cookies)}
    tasks = []
    for i, cookie in enumerate(cookies):
        port = ports[i % len(ports)]
        url, origin = f"ws://127.0.0.1:{port}/ws/inbox/", f"http://127.0.0.1:{port}"
        tasks.append(asyncio.create_task(client(url, cookie, origin, ready, received, counts)))
        if i % 25 == 24:
            await asyncio.sleep(0.05)  # do not stampede the accept queue
    # A raw subscriber on the reviewers' channel group splits the path in two:
    # worker -> channel layer, and channel layer -> daphne -> browser socket.
    from channels.layers import get_channel_layer

    from hitl.core.access.permissions import default_reviewer_group
    from hitl.core.live import listeners

    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = await sync_to_async(default_reviewer_group)()
    await layer.group_add(listeners.inbox_group(group.pk), channel)
    at_layer: list[tuple[str, float]] = []

    async def tap():
        while True:
            message = await layer.receive(channel)
            if message.get("status") == "pending":
                at_layer.append((message["interrupt_id"], time.time()))

    tasks.append(asyncio.create_task(tap()))
    started = time.monotonic()
    await asyncio.wait_for(ready.wait(), 120)
    print(f"  {len(cookies)} clients connected in {time.monotonic() - started:.1f} s")

    # Warm up: the worker's first run imports and compiles the graph.
    await sync_to_async(start_runs)(args.warmup, args.interval)
    await asyncio.sleep(2)
    received.clear()
    at_layer.clear()

    runs = await sync_to_async(start_runs)(args.interrupts, args.interval)
    expected = len(runs) * len(cookies)
    deadline = time.monotonic() + 60
    while len(received) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    created = await sync_to_async(
        lambda: {
            str(pk): ts.timestamp()
            for pk, ts in HumanInterrupt.objects.filter(run_id__in=runs).values_list(
                "pk", "created_at"
            )
        }
    )()
    latencies = [(now - created[i]) * 1000 for i, now in received if i in created]
    per_interrupt: dict[str, int] = {}
    for interrupt_id, _ in received:
        per_interrupt[interrupt_id] = per_interrupt.get(interrupt_id, 0) + 1
    print(f"  interrupts created: {len(created)} of {len(runs)} runs")
    print(f"  deliveries: {len(latencies)} of {len(created) * len(cookies)} expected")
    if latencies:
        print(
            f"  creation -> receipt at each client (ms): "
            f"p50 {percentile(latencies, 50):.1f}  p90 {percentile(latencies, 90):.1f}  "
            f"p99 {percentile(latencies, 99):.1f}  max {max(latencies):.1f}  "
            f"mean {statistics.mean(latencies):.1f}"
        )
        layer_ms = [(now - created[i]) * 1000 for i, now in at_layer if i in created]
        if layer_ms:
            print(
                f"    of which creation -> channel layer (ms): p50 {percentile(layer_ms, 50):.1f}"
                f"  p99 {percentile(layer_ms, 99):.1f}"
            )
        spread = [
            max(t for i, t in received if i == k) - min(t for i, t in received if i == k)
            for k in per_interrupt
        ]
        print(
            f"  fan-out spread (first -> last client, ms): p50 {percentile(spread, 50) * 1000:.1f}"
            f"  max {max(spread) * 1000:.1f}"
        )
        target = percentile(latencies, 50) <= 50 and percentile(latencies, 99) <= 250
        print(f"  target p50 <= 50 ms, p99 <= 250 ms: {'met' if target else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--interrupts", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between runs")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--web", type=int, default=1, help="daphne processes")
    parser.add_argument("--concurrency", type=int, default=2, help="Celery worker children")
    parser.add_argument(
        "--layer", choices=["redis", "redis-pubsub"], default="redis", help="HITL_CHANNEL_LAYER"
    )
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/hitl_bench_push"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()

    ensure_database(args.database_url)
    import redis

    redis.Redis.from_url(args.redis_url).flushdb()
    env = stack_env(args)
    subprocess.run(
        [str(BIN / "python"), "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
    )
    (ROOT / "var").mkdir(exist_ok=True)
    setup_django(args)
    cookies = make_reviewers(args.clients)
    print(
        f"push latency: {args.clients} reviewer sockets, {args.interrupts} interrupts, "
        f"{args.web} daphne + 1 Celery worker (-c {args.concurrency}), channel layer {args.layer}"
    )
    stack = Stack(
        env=stack_env(args),
        log=ROOT / "var" / "bench-push.log",
        web=args.web,
        concurrency=args.concurrency,
        name="bench-push",
    )
    try:
        asyncio.run(measure(args, cookies, stack.ports))
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
