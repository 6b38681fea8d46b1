"""At most once: approved tool calls go through a ledger; any node can get a stable key.

The ledger is an object the host puts into config["configurable"][LEDGER_KEY] (never
checkpointed, like the file store). HITL's lives in hitl/core/ledger.py; without one,
tools run as LangGraph runs them (at least once per attempt).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Protocol

from langgraph.types import Interrupt

LEDGER_KEY = "hitl_ledger"


class ToolLedger(Protocol):
    """One thread's record of approved calls (the host binds it to the thread)."""

    def begin(self, *, interrupt_id: str, tool_call_id: str, tool: str) -> dict[str, Any] | None:
        """Record that the call starts. None when it is new (run it); else the record of
        an earlier attempt: {"status": "started"|"done", "result": {...} | None}."""

    def finish(self, *, interrupt_id: str, tool_call_id: str, result: dict[str, Any]) -> None:
        """Record the call's result ({"content": ..., "status": ...})."""


async def aledger_begin(ledger: ToolLedger, **key: Any) -> dict[str, Any] | None:
    """ledger.begin from async code: the ledger's own `abegin`, else begin on a thread
    (a ledger writes to a database; the event loop must not wait on it)."""
    abegin = getattr(ledger, "abegin", None)
    if abegin is not None:
        return await abegin(**key)
    return await asyncio.to_thread(lambda: ledger.begin(**key))


async def aledger_finish(ledger: ToolLedger, **key: Any) -> None:
    afinish = getattr(ledger, "afinish", None)
    if afinish is not None:
        await afinish(**key)
        return
    await asyncio.to_thread(lambda: ledger.finish(**key))


def idempotency_key(config: dict[str, Any]) -> str:
    """A key that is the same every time this task of this thread runs again.

    Derived from the thread and the task's checkpoint namespace (node name and task id,
    which LangGraph keeps when a step is retried or a redelivered run repeats it), so
    a node can pass it to an external system that drops duplicate requests.
    """
    configurable = config.get("configurable") or {}
    basis = f"{configurable.get('thread_id', '')}|{configurable.get('checkpoint_ns', '')}"
    return hashlib.sha256(basis.encode()).hexdigest()[:32]


def interrupt_id_of(config: dict[str, Any]) -> str:
    """The id LangGraph gives the (first) interrupt of the task running with `config`."""
    return Interrupt.from_ns(None, (config.get("configurable") or {}).get("checkpoint_ns", "")).id
