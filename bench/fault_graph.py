"""The graph bench/faults.py drives: plan -> review (interrupt) -> act, with countable effects.

The same shape as bench/peer_graph.py, but `plan` and `act` each append one line (the
thread id) to `plan.log` / `act.log` in the directory named by HITL_FAULT_DIR, so a
node that ran twice for one thread shows up as two lines. `act` is the side effect a
reviewer approves; repeating it is what a fault must not cause. Each line is written
with one `write` on a file opened with O_APPEND, so lines from concurrent worker
processes do not interleave.

Django-free on purpose; HITL imports it through
HITL_EXTRA_GRAPHS="faults=bench.fault_graph:graph" (cwd = repo root). Compiled without
a checkpointer; HITL binds its own.
"""

import os
import time
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig

from bench.peer_graph import cycle_graph  # the same shape and pause as the peers'


class FaultState(TypedDict, total=False):
    request: str
    plan: dict[str, Any]
    decision: Any
    done: bool


def record(name: str, config: RunnableConfig) -> None:
    folder = os.environ.get("HITL_FAULT_DIR")
    if not folder:
        return
    thread_id = str((config.get("configurable") or {}).get("thread_id", "?"))
    fd = os.open(os.path.join(folder, f"{name}.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{thread_id}\n".encode())
    finally:
        os.close(fd)


def plan(state: FaultState, config: RunnableConfig) -> dict[str, Any]:
    # A model-bound agent: a blocking model call of HITL_FAULT_LATENCY seconds.
    time.sleep(float(os.environ.get("HITL_FAULT_LATENCY") or 0))
    record("plan", config)
    return {"plan": {"action": "send_email", "args": {"to": "team@example.com", "n": 1}}}


def act(state: FaultState, config: RunnableConfig) -> dict[str, Any]:
    decision = state.get("decision") or {}
    approved = isinstance(decision, dict) and decision.get("type") in ("accept", "edit")
    record("act", config)  # the side effect: once per thread, ideally
    return {"done": approved}


graph = cycle_graph(plan, act, FaultState)
