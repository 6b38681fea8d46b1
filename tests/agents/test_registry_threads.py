"""Describing graphs from many threads at once, as a fresh web process's first requests do."""

from __future__ import annotations

import gc
import inspect
import sys
import threading
import time

from agents import react
from agents.registry import describe

THREADS = 8
MODULES_PER_THREAD = 6


def test_graphs_described_from_many_threads_at_once_never_raise(tmp_path, monkeypatch):
    """CPython 3.11's ast.parse is not safe across threads ("AST constructor recursion
    depth mismatch"). Each thread describes graphs in modules no one has read yet (a
    fresh process's cache), all starting on a barrier; a garbage collection hook yields
    the GIL mid-parse, where a busy server's thread switch would come."""
    body = inspect.getsource(react)  # a real module's worth of syntax to parse
    for i in range(THREADS * MODULES_PER_THREAD):
        source = f'{body}\n\ngraph_{i} = object()\n"""Graph number {i}: what it does."""\n'
        (tmp_path / f"described_{i}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    outcomes: dict[int, str] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def work(first: int) -> None:
        barrier.wait()
        try:
            for i in range(first, first + MODULES_PER_THREAD):
                outcomes[i] = describe(f"described_{i}:graph_{i}")
        except BaseException as exc:
            errors.append(exc)

    def switch(phase: str, info: dict) -> None:
        time.sleep(0)  # let another thread take the GIL

    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.callbacks.append(switch)
    gc.set_threshold(50)
    sys.setswitchinterval(1e-6)
    try:
        workers = [
            threading.Thread(target=work, args=(n * MODULES_PER_THREAD,)) for n in range(THREADS)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        gc.callbacks.remove(switch)
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
        for i in range(THREADS * MODULES_PER_THREAD):
            sys.modules.pop(f"described_{i}", None)
    assert errors == []
    assert outcomes == {
        i: f"Graph number {i}: what it does." for i in range(THREADS * MODULES_PER_THREAD)
    }
