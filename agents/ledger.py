"""At most once: approved tool calls go through a ledger; any node can get a stable key.

The ledger is an object the host puts into config["configurable"][LEDGER_KEY] (never
checkpointed, like the file store). HITL's lives in hitl/core/worker/ledger.py; without one,
tools run as LangGraph runs them (at least once per attempt).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
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


class EffectUnknown(RuntimeError):
    """An approved effect was started by an earlier attempt whose worker stopped before
    it reported back: it may have happened, so it is not run again."""


def _once_key(config: dict[str, Any], name: str) -> dict[str, str]:
    return {"interrupt_id": interrupt_id_of(config), "tool_call_id": f"once:{name}"[:200]}


def _replay(earlier: dict[str, Any], name: str) -> Any:
    if earlier.get("status") == "done" and earlier.get("result"):
        return earlier["result"].get("content")
    raise EffectUnknown(
        f"{name} was started by an earlier attempt whose worker stopped before it reported "
        "back; it was not run again. Check its effect before retrying."
    )


def once(config: dict[str, Any], fn: Callable[[], Any], *, name: str = "effect") -> Any:
    """Run `fn()` at most once for this task of this thread, and return its result.

    For a node that calls interrupt() and then performs the approved side effect itself:

        decision = interrupt(request)
        if decision["type"] == "accept":
            receipt = once(config, lambda: send_email(**args), name="send_email")

    If the worker dies after the effect and before the node's checkpoint, the retried
    node gets the recorded result instead of repeating the effect (the result must be
    JSON: it is kept in the ledger). An attempt that died during the effect raises
    EffectUnknown. `name` tells apart several effects of one node. Without a ledger
    (plain LangGraph) `fn` just runs.
    """
    ledger = (config.get("configurable") or {}).get(LEDGER_KEY)
    if ledger is None:
        return fn()
    key = _once_key(config, name)
    earlier = ledger.begin(tool=name, **key)
    if earlier is not None:
        return _replay(earlier, name)
    try:
        result = fn()
    except Exception as exc:
        ledger.finish(
            result={"content": f"{type(exc).__name__}: {exc}"[:2000], "status": "error"}, **key
        )
        raise
    ledger.finish(result={"content": result, "status": "success"}, **key)
    return result


async def aonce(
    config: dict[str, Any], fn: Callable[[], Awaitable[Any]], *, name: str = "effect"
) -> Any:
    """`once` for async nodes: `await aonce(config, lambda: client.send(...))`."""
    ledger = (config.get("configurable") or {}).get(LEDGER_KEY)
    if ledger is None:
        return await fn()
    key = _once_key(config, name)
    earlier = await aledger_begin(ledger, tool=name, **key)
    if earlier is not None:
        return _replay(earlier, name)
    try:
        result = await fn()
    except Exception as exc:
        await aledger_finish(
            ledger,
            result={"content": f"{type(exc).__name__}: {exc}"[:2000], "status": "error"},
            **key,
        )
        raise
    await aledger_finish(ledger, result={"content": result, "status": "success"}, **key)
    return result


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
