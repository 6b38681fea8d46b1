"""The load bench/faults.py drives through a fault: langgraph_sdk clients running the
cycle, retrying a 503 as its Retry-After says (and joining a run that the refused POST
had created), counting every other failure as a client error."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from dataclasses import dataclass, field

from bench.common import RESUME
from bench.fault_stack import ASSISTANT
from bench.peer_servers import log

INPUT = {"request": "faults"}


@dataclass
class Load:
    cycles: int
    ok: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)  # by kind
    statuses: collections.Counter = field(default_factory=collections.Counter)  # HTTP errors
    retries_503: int = 0
    bodies_503: collections.Counter = field(default_factory=collections.Counter)
    joined_after_503: int = 0
    first_errors: dict[str, str] = field(default_factory=dict)
    threads: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    half1: list[float] = field(default_factory=list)
    half2: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    stock: bool = False  # a plain langgraph_sdk client: a 503 is an error, not retried

    def error(self, kind: str, detail: str, thread_id: str | None) -> None:
        self.errors[kind] += 1
        self.first_errors.setdefault(kind, f"thread {thread_id}: {detail}"[:400])

    @property
    def client_errors(self) -> int:
        return sum(self.errors.values())


class Gave503(Exception):
    pass


def _status(exc: BaseException) -> int | None:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError) and exc.response is not None:
        return exc.response.status_code
    return None


def _body(exc: BaseException) -> str:
    with contextlib.suppress(Exception):
        return exc.response.text[:200]  # type: ignore[attr-defined]
    return ""


async def _retry_after(load: Load, exc: BaseException, deadline: float) -> None:
    load.bodies_503[_body(exc)] += 1
    if load.stock:
        raise exc
    load.retries_503 += 1
    load.statuses[503] += 1
    if time.monotonic() > deadline:
        raise Gave503("still 503 after 120 s") from exc
    try:
        seconds = float(exc.response.headers.get("Retry-After") or 1)  # type: ignore[attr-defined]
    except ValueError:
        seconds = 1.0
    await asyncio.sleep(min(max(seconds, 0.1), 30))


async def _call(load: Load, make):
    """Await make() until it answers something other than 503."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return await make()
        except Exception as exc:
            if _status(exc) != 503:
                raise
            await _retry_after(load, exc, deadline)


async def _wait_run(load: Load, client, thread_id: str, runs_before: int, naive: bool, **kwargs):
    """runs.wait; after a 503, join the run if the POST had created it, else POST again.

    With `naive`, POST again without looking (what a generic retry-on-503 client does).
    """
    deadline = time.monotonic() + 120
    while True:
        try:
            return await client.runs.wait(thread_id, ASSISTANT, **kwargs)
        except Exception as exc:
            if _status(exc) != 503:
                raise
            await _retry_after(load, exc, deadline)
        if naive:
            continue
        runs = await _call(load, lambda: client.runs.list(thread_id, limit=10))
        if len(runs) > runs_before:
            load.joined_after_503 += 1
            run_id = runs[0]["run_id"]  # newest first
            return await _call(load, lambda run_id=run_id: client.runs.join(thread_id, run_id))


async def drive(
    base_url: str,
    token: str,
    clients: int,
    cycles: int,
    straggle: float,
    naive: bool = False,
    stock: bool = False,
    headers: dict[str, str] | None = None,
) -> Load:
    import httpx
    from langgraph_sdk import get_client

    load = Load(cycles, stock=stock)
    claimed = {"n": 0, "done": 0}
    in_flight: dict[int, str | None] = {}

    async def one_cycle(client, n: int) -> None:
        thread_id = None
        in_flight[n] = None
        try:
            t0 = time.perf_counter()
            thread = await _call(load, lambda: client.threads.create())
            thread_id = thread["thread_id"]
            in_flight[n] = thread_id
            load.threads.append(thread_id)
            first = await _wait_run(load, client, thread_id, 0, naive, input=INPUT)
            t1 = time.perf_counter()
            if not (isinstance(first, dict) and first.get("__interrupt__")):
                load.error("no interrupt after half 1", str(first)[:200], thread_id)
                return
            last = await _wait_run(load, client, thread_id, 1, naive, command=RESUME)
            t2 = time.perf_counter()
            if not (isinstance(last, dict) and last.get("done") is True):
                load.error("act did not run", str(last)[:200], thread_id)
                return
            load.ok += 1
            load.half1.append((t1 - t0) * 1000)
            load.half2.append((t2 - t1) * 1000)
        except Gave503 as exc:
            load.error("503 for 120 s", str(exc), thread_id)
        except Exception as exc:  # noqa: BLE001 - counted
            status = _status(exc)
            if status is not None:
                load.statuses[status] += 1
                load.error(f"HTTP {status}", _body(exc) or str(exc), thread_id)
            elif isinstance(exc, httpx.TransportError):
                load.error("transport", f"{type(exc).__name__}: {exc}", thread_id)
            else:
                load.error(type(exc).__name__, str(exc), thread_id)
        finally:
            in_flight.pop(n, None)
            claimed["done"] += 1
            if claimed["done"] % 25 == 0:
                log(
                    f"  {claimed['done']}/{cycles} cycles: ok {load.ok}, client errors "
                    f"{load.client_errors}, 503 retries {load.retries_503}"
                )

    async def client_loop(client) -> None:
        while claimed["n"] < cycles:
            n = claimed["n"]
            claimed["n"] += 1
            await one_cycle(client, n)

    sdk = [
        get_client(url=f"{base_url}/langgraph", api_key=token, timeout=330, headers=headers)
        for _ in range(clients)
    ]
    began = time.perf_counter()
    tasks = [asyncio.create_task(client_loop(c)) for c in sdk]
    deadline = None
    try:
        while True:
            _, pending = await asyncio.wait(tasks, timeout=1.0)
            if not pending:
                break
            if claimed["n"] >= cycles and deadline is None:
                deadline = time.monotonic() + straggle
            if deadline is not None and time.monotonic() > deadline:
                load.given_up = [t or "(no thread yet)" for t in in_flight.values()]
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                for thread_id in load.given_up:
                    load.error("given up (no answer)", f"after {straggle:.0f} s", thread_id)
                log(f"  gave up on {len(load.given_up)} straggling cycles")
                break
    finally:
        load.elapsed = time.perf_counter() - began
        for c in sdk:
            with contextlib.suppress(Exception):
                await c.aclose()
    return load
