"""Graphs the operations tests register: gated where a test wants to kill or race a worker,
with side effects counted in files, and one that fails until it is fixed.

Workers load them through HITL_EXTRA_GRAPHS=OPS_GRAPHS; in-process tests add TARGETS to
the registry (the `ops_graphs` fixture).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState
from langgraph.types import interrupt

from agents.tools import approval_tool_node, require_approval

TARGETS = {
    "ops_gated": "tests.ops.graphs:gated_graph",
    "ops_flaky": "tests.ops.graphs:flaky_graph",
    "ops_tool_gated": "tests.ops.graphs:tool_gated_graph",
}
OPS_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())


def _log(folder: str | None, name: str) -> None:
    if folder:
        with (Path(folder) / name).open("a") as fh:
            fh.write(f"{os.getpid()}\n")


def _gate(folder: str | None, name: str) -> None:
    """Mark that this process reached gate `name`, then wait for the test to open it."""
    if not folder:
        return
    path = Path(folder)
    (path / f"at-{name}-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while not (path / f"open-{name}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


class GatedState(TypedDict, total=False):
    dir: str
    gates: list[str]
    request: dict[str, Any]
    decision: Any


def _prepare(state: GatedState) -> dict[str, Any]:
    _log(state.get("dir"), "prepare.log")
    if "prepare" in (state.get("gates") or []):
        _gate(state.get("dir"), "prepare")
    return {}


def _approve(state: GatedState) -> dict[str, Any]:
    request = {
        "action_request": {"action": "publish", "args": {"copies": 1}},
        "config": {
            "allow_accept": True,
            "allow_edit": True,
            "allow_respond": True,
            "allow_ignore": True,
        },
        "description": "Publish the report?",
    }
    # The test may set config, expires_in, expiry_policy, escalate_to, reviewer_group.
    request.update(state.get("request") or {})
    return {"decision": interrupt(request)}


def _act(state: GatedState) -> dict[str, Any]:
    if (state.get("decision") or {}).get("type") in ("accept", "edit"):
        _log(state.get("dir"), "published.log")
    return {}


def _wrapup(state: GatedState) -> dict[str, Any]:
    _log(state.get("dir"), "wrapup.log")
    if "wrapup" in (state.get("gates") or []):
        _gate(state.get("dir"), "wrapup")
    return {}


gated_graph = (
    StateGraph(GatedState)
    .add_node("prepare", _prepare)
    .add_node("approve", _approve)
    .add_node("act", _act)
    .add_node("wrapup", _wrapup)
    .add_edge(START, "prepare")
    .add_edge("prepare", "approve")
    .add_edge("approve", "act")
    .add_edge("act", "wrapup")
    .add_edge("wrapup", END)
    .compile()
)


class FlakyState(TypedDict, total=False):
    dir: str
    steps: list[str]


def _first(state: FlakyState) -> dict[str, Any]:
    _log(state["dir"], "first.log")
    return {"steps": ["first"]}


def _second(state: FlakyState) -> dict[str, Any]:
    _log(state["dir"], "second.log")
    if not (Path(state["dir"]) / "fixed").exists():
        raise RuntimeError("the downstream service is down")
    return {"steps": [*state.get("steps", []), "second"]}


flaky_graph = (
    StateGraph(FlakyState)
    .add_node("first", _first)
    .add_node("second", _second)
    .add_edge(START, "first")
    .add_edge("first", "second")
    .add_edge("second", END)
    .compile()
)


class ToolGatedState(TypedDict, total=False):
    dir: str
    messages: Annotated[list, add_messages]


@tool
def publish(
    copies: int,
    folder: Annotated[str, InjectedState("dir")],
    call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Publish the report: the side effect the approval gate guards, one line per call."""
    with (Path(folder) / "published.log").open("a") as fh:
        fh.write(f"{call_id}\n")
    return f"published {copies} copies"


def _propose(state: ToolGatedState, config: RunnableConfig) -> dict[str, Any]:
    thread_id = config["configurable"]["thread_id"]
    call = {"name": "publish", "args": {"copies": 1}, "id": f"call-{thread_id}"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


# An agent's tool call through require_approval: the ledger runs it at most once per
# decision, whatever happens to the worker or its database sessions.
tool_gated_graph = (
    StateGraph(ToolGatedState)
    .add_node("propose", _propose)
    .add_node(
        "tools", approval_tool_node([require_approval(publish, config={"allow_edit": False})])
    )
    .add_edge(START, "propose")
    .add_edge("propose", "tools")
    .add_edge("tools", END)
    .compile()
)
