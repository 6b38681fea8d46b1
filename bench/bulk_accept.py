"""Bulk accept of N inbox items: how long it takes, and how the inbox answers meanwhile.

Fills a benchmark database with N pending interrupts (one thread each, so every accept
also records the thread's resume run), then, in this process through Django's test
client:

1. renders the inbox page --samples times while idle (baseline);
2. POSTs one bulk accept of all N items (`/interrupts/bulk/`, scope=filter) on a thread
   while another reviewer keeps loading the inbox page, and reports both.

Runs are not executed (HITL_EXECUTOR=manual): this measures the decision path, not the
agents. Pass --redis to publish the live events to a real Redis channel layer.

    .venv/bin/python bench/bulk_accept.py --items 200

Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import percentile, setup_django  # noqa: E402


def fill(items: int) -> None:
    from django.contrib.auth.models import Group
    from django.db import transaction

    from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread

    group, _ = Group.objects.get_or_create(name="reviewers")
    with transaction.atomic():
        HumanInterrupt.objects.all().delete()
        Run.objects.all().delete()
        Thread.objects.all().delete()
    del AuditEvent  # append-only: old rows stay, they do not affect the measurement
    threads = Thread.objects.bulk_create(
        [
            Thread(graph="approval", title=f"bulk {i}", status="interrupted", reviewer_group=group)
            for i in range(items)
        ]
    )
    runs = Run.objects.bulk_create(
        [Run(thread=t, kind="start", status="interrupted") for t in threads]
    )
    HumanInterrupt.objects.bulk_create(
        [
            HumanInterrupt(
                thread=thread,
                run=run,
                interrupt_id=f"bulk-{thread.pk.hex}",
                kind="human_interrupt",
                raw_value={"action_request": {"action": "send_email", "args": {"n": i}}},
                action="send_email",
                args={"to": "team@example.com", "n": i},
                allow_accept=True,
                allow_ignore=True,
                allow_respond=True,
                reviewer_group=group,
            )
            for i, (thread, run) in enumerate(zip(threads, runs, strict=True))
        ]
    )


def users():
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user_model = get_user_model()
    group = Group.objects.get(name="reviewers")
    made = []
    for name in ("bench-bulk-rita", "bench-bulk-sam"):
        user, _ = user_model.objects.get_or_create(username=name)
        user.groups.add(group)
        made.append(user)
    return made


def inbox_times(client, stop: threading.Event | None, samples: int) -> list[float]:
    from django.db import connection

    times: list[float] = []
    try:
        while (stop is None and len(times) < samples) or (stop is not None and not stop.is_set()):
            started = time.perf_counter()
            response = client.get("/")
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.status_code
    finally:
        connection.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--redis", default="", help="a Redis URL for the channel layer")
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/hitl_bench_bulk"
    )
    args = parser.parse_args()

    setup_django(
        args.database_url,
        HITL_UNDO_SECONDS="0",
        **({"REDIS_URL": args.redis} if args.redis else {}),
    )
    from django.test import Client

    from hitl.core.models import HumanInterrupt, Run

    fill(args.items)
    rita, sam = users()
    deciding, watching = Client(), Client()
    deciding.force_login(rita)
    watching.force_login(sam)

    inbox_times(watching, None, 3)  # warm
    idle = inbox_times(watching, None, args.samples)

    stop = threading.Event()
    during: list[float] = []
    watcher = threading.Thread(
        target=lambda: during.extend(inbox_times(watching, stop, 0)), daemon=True
    )
    watcher.start()
    started = time.perf_counter()
    response = deciding.post(
        "/interrupts/bulk/",
        {"type": "accept", "scope": "filter"},
        HTTP_ACCEPT="application/json",
    )
    bulk_ms = (time.perf_counter() - started) * 1000
    stop.set()
    watcher.join()
    assert response.status_code == 200, response.content[:500]
    counts = response.json()["counts"]
    decided = HumanInterrupt.objects.filter(status="resolved").count()
    resumes = Run.objects.filter(kind="resume").count()

    layer = "Redis channel layer" if args.redis else "in-memory channel layer"
    print(f"bulk accept of {args.items} items (Postgres, {layer}, in-process test client)")
    print(
        f"  bulk request: {bulk_ms:.0f} ms total, {bulk_ms / args.items:.1f} ms per item; "
        f"results {counts}; {decided} resolved, {resumes} resume runs recorded"
    )
    print(
        f"  inbox page, idle:        p50 {percentile(idle, 50):6.1f} ms  "
        f"p99 {percentile(idle, 99):6.1f} ms  ({len(idle)} requests)"
    )
    print(
        f"  inbox page, during bulk: p50 {percentile(during, 50):6.1f} ms  "
        f"p99 {percentile(during, 99):6.1f} ms  max {max(during or [0]):6.1f} ms  "
        f"({len(during)} requests)"
    )


if __name__ == "__main__":
    main()
