"""AG-UI event dicts for thread streams (the wire vocabulary of DESIGN.md)."""

from __future__ import annotations

import time
from typing import Any


def _now_ms() -> int:
    return int(time.time() * 1000)


def run_started(thread_id: Any, run_id: Any) -> dict[str, Any]:
    return {
        "type": "RUN_STARTED",
        "threadId": str(thread_id),
        "runId": str(run_id),
        "timestamp": _now_ms(),
    }


def run_finished(
    thread_id: Any, run_id: Any, *, interrupts: list[tuple[str, Any, Any]], result: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": str(thread_id),
        "runId": str(run_id),
        "timestamp": _now_ms(),
    }
    if interrupts:
        event["outcome"] = "interrupt"
        event["interrupts"] = [
            {"id": interrupt_id, "value": value, "responseSchema": schema}
            for interrupt_id, value, schema in interrupts
        ]
    else:
        event["outcome"] = "success"
        event["result"] = result
    return event


def run_error(message: str) -> dict[str, Any]:
    return {"type": "RUN_ERROR", "message": message[:2000], "timestamp": _now_ms()}


def events_for_chunk(mode: str, chunk: Any) -> list[dict[str, Any]]:
    """Translate one LangGraph stream chunk into AG-UI events."""
    if mode == "updates" and isinstance(chunk, dict):
        return [
            {"type": "STEP_FINISHED", "stepName": node, "timestamp": _now_ms()}
            for node in chunk
            if not node.startswith("__")
        ]
    return []
