"""Helpers for the worker's tests: a tool call as the approval tool node receives it."""

from __future__ import annotations

from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest

from agents.ledger import LEDGER_KEY
from hitl.core.models import Thread
from hitl.core.worker.ledger import ThreadToolLedger


@tool
def send_money(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


def request_for(thread: Thread, call_id: str = "call-1", ns: str = "tools:abc") -> ToolCallRequest:
    config = {
        "configurable": {
            "thread_id": str(thread.pk),
            "checkpoint_ns": ns,
            LEDGER_KEY: ThreadToolLedger(thread.pk),
        }
    }
    call = {"name": "send_money", "args": {"amount": 5}, "id": call_id, "type": "tool_call"}
    runtime = ToolRuntime(
        state={}, context=None, config=config, stream_writer=lambda _: None,
        tool_call_id=call_id, store=None,
    )  # fmt: skip
    return ToolCallRequest(tool_call=call, tool=send_money, state={}, runtime=runtime)
