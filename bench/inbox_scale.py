"""Inbox at scale: 100k threads and 20k pending interrupts, first / middle / last page.

Fills a benchmark database (once; --reset to refill), then renders inbox pages through
Django's test client in this process and prints the server time (p50/p99 over
--repeat requests: URL routing, session, middleware, queries, template) and the
number of SQL queries of each page.

    .venv/bin/python bench/inbox_scale.py --threads 100000 --pending 20000

Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import percentile, setup_django  # noqa: E402

GROUPS = ["reviewers", "finance", "legal", "ops"]
GRAPHS = ["demo", "approval", "parallel_approval", "raw_question"]
STATUSES = [("done", 0.6), ("idle", 0.12), ("error", 0.04), ("busy", 0.04)]  # + interrupted
CLARIFICATIONS = ["missing_info", "ambiguous_requirement", "approach_choice", "risk_confirmation"]


def fill(threads: int, pending: int, seed: int = 7) -> None:
    """Bulk-insert threads, one run per interrupted thread, and its pending interrupt."""
    from django.contrib.auth.models import Group
    from django.db import connection, transaction

    from hitl.core.models import HumanInterrupt, Run, Thread

    rng = random.Random(seed)
    groups = [Group.objects.get_or_create(name=n)[0] for n in GROUPS]
    started = time.monotonic()
    with transaction.atomic():
        HumanInterrupt.objects.all().delete()
        Run.objects.all().delete()
        Thread.objects.all().delete()
    batch = 5000
    statuses = []
    for status, share in STATUSES:
        statuses += [status] * int(share * threads)
    statuses += ["interrupted"] * (threads - len(statuses))
    rng.shuffle(statuses)
    interrupted_left = pending
    for offset in range(0, threads, batch):
        rows = []
        for i in range(offset, min(offset + batch, threads)):
            status = statuses[i]
            if status == "interrupted" and interrupted_left <= 0:
                status = "done"
            if status == "interrupted":
                interrupted_left -= 1
            rows.append(
                Thread(
                    graph=rng.choice(GRAPHS),
                    title=f"Thread {i}: quarterly report {rng.randint(1, 4)}",
                    status=status,
                    reviewer_group=rng.choice(groups),
                )
            )
        Thread.objects.bulk_create(rows, batch_size=batch)
        with transaction.atomic():
            made = [t for t in rows if t.status == "interrupted"]
            runs = Run.objects.bulk_create(
                [Run(thread=t, kind="start", status="interrupted") for t in made],
                batch_size=batch,
            )
            interrupts = []
            for thread, run in zip(made, runs, strict=True):
                clarify = rng.random() < 0.3
                action = "ask_clarification" if clarify else "send_email"
                args = (
                    {"question": "Which quarter?", "clarification_type": rng.choice(CLARIFICATIONS)}
                    if clarify
                    else {"to": "team@example.com", "subject": "Report", "copies": 1}
                )
                interrupts.append(
                    HumanInterrupt(
                        thread=thread,
                        run=run,
                        interrupt_id=f"bench-{thread.pk.hex}",
                        kind="human_interrupt",
                        raw_value={"action_request": {"action": action, "args": args}},
                        action=action,
                        args=args,
                        description="The agent wants to **send the report**.",
                        allow_accept=True,
                        allow_edit=True,
                        allow_respond=True,
                        allow_ignore=True,
                        reviewer_group=thread.reviewer_group,
                    )
                )
            HumanInterrupt.objects.bulk_create(interrupts, batch_size=batch)
        print(f"  {min(offset + batch, threads)} threads", end="\r", flush=True)
    # Spread the timestamps over three months so pages do not tie on one instant.
    with connection.cursor() as cursor:
        cursor.execute(
            "update hitl_thread set updated_at = now() - random() * interval '90 days',"
            " created_at = now() - interval '91 days'"
        )
        cursor.execute(
            "update hitl_humaninterrupt set created_at = now() - random() * interval '30 days'"
        )
        cursor.execute("analyze")
    print(f"  filled {threads} threads / {pending} pending in {time.monotonic() - started:.0f} s")


def users():
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group, Permission

    User = get_user_model()
    reviewer, _ = User.objects.get_or_create(username="bench-inbox-reviewer")
    reviewer.groups.add(Group.objects.get(name="reviewers"))
    lead, _ = User.objects.get_or_create(username="bench-inbox-lead")
    lead.user_permissions.add(
        Permission.objects.get(codename="review_all", content_type__app_label="hitl")
    )
    return reviewer, lead


def middle_cursor(user, tab: str) -> str:
    """The cursor a reviewer paging from the top would hold halfway down the list."""
    from hitl.review.selectors import (
        InboxQuery,
        encode_cursor,
        pending_interrupts_for,
        threads_for,
    )

    query = InboxQuery(tab=tab)
    if tab == "pending":
        qs, field = pending_interrupts_for(user, query), "created_at"
    else:
        qs, field = threads_for(user, query), "updated_at"
    total = qs.count()
    row = qs.order_by(f"-{field}", "-pk")[total // 2]
    return encode_cursor(getattr(row, field), row.pk), total


def measure(client, url: str, repeat: int) -> tuple[list[float], int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm: template and query plans
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    rows = response.content.decode().count('<tr class="row ')
    sql_ms = sum(float(q["time"]) for q in ctx.captured_queries) * 1000
    return times, len(ctx.captured_queries), rows, sql_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--pending", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--reset", action="store_true", help="refill the database")
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/hitl_bench_inbox"
    )
    args = parser.parse_args()

    setup_django(args.database_url)  # pages only: no channel layer, no broker
    from django.test import Client

    from hitl.core.models import HumanInterrupt, Thread

    have = (Thread.objects.count(), HumanInterrupt.objects.filter(status="pending").count())
    if args.reset or have != (args.threads, args.pending):
        fill(args.threads, args.pending)
    reviewer, lead = users()
    print(
        f"inbox at scale: {Thread.objects.count()} threads, "
        f"{HumanInterrupt.objects.filter(status='pending').count()} pending interrupts, "
        f"{args.repeat} requests per page (server time in-process, Postgres)"
    )
    print(
        f"  {'who / tab (items)':<44}{'page':<8}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'queries':>9}{'SQL ms':>8}{'rows':>6}"
    )
    for user, label in ((lead, "review-all"), (reviewer, "reviewer, 1 of 4 groups")):
        client = Client()
        client.force_login(user)
        for tab in ("pending", "all"):
            cursor, total = middle_cursor(user, tab)
            pages = [("first", f"/?tab={tab}"), ("middle", f"/?tab={tab}&after={cursor}")]
            pages.append(("last", f"/?tab={tab}&last=1"))
            for name, url in pages:
                times, queries, rows, sql_ms = measure(client, url, args.repeat)
                print(
                    f"  {label + ' / ' + tab + f' ({total})':<44}{name:<8}"
                    f"{percentile(times, 50):>8.1f}{percentile(times, 99):>8.1f}"
                    f"{queries:>9}{sql_ms:>8.1f}{rows:>6}"
                )


if __name__ == "__main__":
    main()
