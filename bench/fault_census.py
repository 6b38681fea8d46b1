"""What bench/faults.py counts once a scenario's load and faults are over: from the
database, runs failed or stuck and threads done without their review; from the graph's
effect files, nodes that ran more than once; from the logs, the notable lines."""

from __future__ import annotations

import collections
import re
import time
from pathlib import Path

from bench.peer_servers import log

ACTIVE_SQL = """
select count(*) from hitl_thread t
where t.status in ('busy', 'queued')
   or exists (select 1 from hitl_run r where r.thread_id = t.id and r.status in ('queued', 'running'))
"""


def settle(database_url: str, seconds: float) -> int:
    """Wait up to `seconds` for every run to leave queued/running; return what is left."""
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        with psycopg.connect(database_url, autocommit=True) as conn:
            active = conn.execute(ACTIVE_SQL).fetchone()[0]
        if active == 0 or time.monotonic() > deadline:
            return active
        log(f"  {active} threads still busy / with queued or running runs; waiting")
        time.sleep(5)


def effect_counts(folder: Path, name: str) -> collections.Counter:
    path = folder / f"{name}.log"
    lines = path.read_text().split() if path.exists() else []
    return collections.Counter(lines)


def measure(database_url: str, effects: Path) -> dict:
    import psycopg
    from psycopg.rows import dict_row

    acts, plans = effect_counts(effects, "act"), effect_counts(effects, "plan")
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:

        def ids(sql: str) -> list[str]:
            return [str(r["id"]) for r in conn.execute(sql).fetchall()]

        failed_runs = conn.execute(
            "select id, thread_id, kind, attempts, error from hitl_run where status = 'error'"
        ).fetchall()
        stuck = ids(
            "select t.id from hitl_thread t where t.status in ('busy', 'queued') or exists "
            "(select 1 from hitl_run r where r.thread_id = t.id and r.status in ('queued', 'running'))"
        )
        done_unreviewed = ids(
            "select t.id from hitl_thread t where t.status = 'done' and ("
            " not exists (select 1 from hitl_humaninterrupt i where i.thread_id = t.id)"
            " or exists (select 1 from hitl_humaninterrupt i where i.thread_id = t.id"
            "            and i.status <> 'resolved'))"
        )
        answered_unfinished = ids(
            "select distinct t.id from hitl_thread t join hitl_humaninterrupt i on i.thread_id = t.id "
            "where i.status = 'resolved' and t.status <> 'done'"
        )
        extra_rows = ids(
            "select thread_id as id from hitl_humaninterrupt group by thread_id having count(*) > 1"
        )
        thread_status = dict(
            (r["status"], r["n"])
            for r in conn.execute(
                "select status, count(*) n from hitl_thread group by 1 order by 1"
            )
        )
        run_status = dict(
            (f"{r['kind']}/{r['status']}", r["n"])
            for r in conn.execute(
                "select kind, status, count(*) n from hitl_run group by 1, 2 order by 1, 2"
            )
        )
        attempts = dict(
            (r["attempts"], r["n"])
            for r in conn.execute("select attempts, count(*) n from hitl_run group by 1 order by 1")
        )
        audit = dict(
            (r["kind"], r["n"])
            for r in conn.execute(
                "select kind, count(*) n from hitl_auditevent group by 1 order by 1"
            )
        )
        done_threads = set(ids("select id from hitl_thread where status = 'done'"))
        resolved_threads = set(
            ids(
                "select distinct thread_id as id from hitl_humaninterrupt where status = 'resolved'"
            )
        )
        suspects = sorted(
            set(stuck) | set(done_unreviewed) | set(answered_unfinished)
            | {str(r["thread_id"]) for r in failed_runs}
            | {t for t, n in acts.items() if n > 1}
            | {t for t, n in plans.items() if n > 1}
            | set(ids("select distinct thread_id as id from hitl_run where attempts > 1"))
        )[:40]  # fmt: skip
        detail = {}
        for thread_id in suspects:
            detail[thread_id] = {
                "thread": conn.execute(
                    "select status, created_at, updated_at from hitl_thread where id = %s",
                    (thread_id,),
                ).fetchone(),
                "runs": conn.execute(
                    "select id, kind, status, attempts, lease_owner, created_at, dispatched_at, "
                    "started_at, finished_at, left(error, 2000) as error "
                    "from hitl_run where thread_id = %s order by created_at",
                    (thread_id,),
                ).fetchall(),
                "interrupts": conn.execute(
                    "select id, status, response_type, created_at, responded_at "
                    "from hitl_humaninterrupt where thread_id = %s order by created_at",
                    (thread_id,),
                ).fetchall(),
                "audit": conn.execute(
                    "select created_at, kind, data from hitl_auditevent where thread_id = %s "
                    "order by id",
                    (thread_id,),
                ).fetchall(),
                "plan_lines": plans.get(thread_id, 0),
                "act_lines": acts.get(thread_id, 0),
            }
    return {
        "failed_runs": failed_runs,
        "stuck": stuck,
        "done_unreviewed": done_unreviewed,
        "answered_unfinished": answered_unfinished,
        "extra_interrupt_rows": extra_rows,
        "repeated_act": sorted(t for t, n in acts.items() if n > 1),
        "repeated_plan": sorted(t for t, n in plans.items() if n > 1),
        "act_unreviewed": sorted(t for t in acts if t not in resolved_threads),
        "done_without_act": sorted(t for t in done_threads if t not in acts),
        "act_lines": sum(acts.values()),
        "plan_lines": sum(plans.values()),
        "thread_status": thread_status,
        "run_status": run_status,
        "attempts": attempts,
        "audit": audit,
        "detail": detail,
    }


LOG_PATTERNS = re.compile(
    r"Traceback|ERROR|CRITICAL|Internal Server Error|WorkerLostError|failed|"
    r"transient fault|could not|unreachable|Service Unavailable|re-sent|reaper:"
)


def log_summary(workdir: Path, limit: int = 12) -> dict[str, dict]:
    """Per log file: counts of notable lines and the first few distinct ones."""
    out: dict[str, dict] = {}
    for path in sorted(workdir.glob("*.log")):
        counts: collections.Counter = collections.Counter()
        firsts: list[str] = []
        seen: set[str] = set()
        for line in path.read_text(errors="replace").splitlines():
            match = LOG_PATTERNS.search(line)
            if not match:
                continue
            counts[match.group(0)] += 1
            key = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "#", line)[:160]
            if key not in seen and len(firsts) < limit:
                seen.add(key)
                firsts.append(line[:400])
        if counts:
            out[path.name] = {"counts": dict(counts), "first": firsts}
    return out
