"""`bench/model_bound.py --waits N`: N waits open at once against HITL (a third each
`runs.wait`, `runs.stream` and `runs.create` + `runs.join`) on runs that queue behind
the worker, with the peak Postgres sessions of the web process next to its pool size."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time

from bench.model_targets import PY, ROOT, HitlTarget
from bench.peer_servers import log


def pool_max(target: HitlTarget) -> tuple[int, int]:
    out = subprocess.run(
        [
            PY,
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
