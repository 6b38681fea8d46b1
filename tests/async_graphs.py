"""Async graphs the run-engine tests register: `async def` nodes, an async chat model,
an async-only tool under require_approval, and a graph mixing sync and async nodes.

Side effects are counted in files under the run's `dir`; an async gate makes a node
wait (awaiting, like a model call) until the test opens it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from agents.ledger import once
from agents.models import get_model as scripted_model
from agents.models import latest_request, reply, tool_results
from agents.react import build_react_agent
from agents.tools import approval_tool_node, require_approval

TARGETS = {
    "async_gated": "tests.async_graphs:async_gated_graph",
    "fleet": "tests.async_graphs:fleet_graph",
    "seed_once": "tests.async_graphs:seed_once_graph",
    "mcp_agent": "tests.async_graphs:mcp_agent",
    "mixed_nodes": "tests.async_graphs:mixed_graph",
    "async_tool_agent": "tests.async_graphs:async_tool_agent",
    "sync_gated": "tests.async_graphs:sync_gated_graph",
}
ASYNC_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())


def log(folder: str | None, name: str) -> None:
    if folder:
        with (Path(folder) / name).open("a") as fh:
            fh.write(f"{os.getpid()}\n")


async def agate(folder: str | None, name: str) -> None:
    """Mark that this run reached gate `name`, then await the test opening it."""
    if not folder:
        return
    path = Path(folder)
    (path / f"at-{name}-{os.getpid()}").touch()
    deadline = time.monotonic() + 120
    while not (path / f"open-{name}").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


class GatedAsyncModel(BaseChatModel):
    """A chat model with only an async path that answers once its gate opens: stands
    for a model API a run awaits for seconds."""

    @property
    def _llm_type(self) -> str:
        return "gated-async"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        raise NotImplementedError("this model is async only")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        await agate(kwargs.get("gate_dir"), "model")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="a plan"))])


MODEL = GatedAsyncModel()


class GatedState(TypedDict, total=False):
    dir: str
    gates: list[str]
    request: dict[str, Any]
    plan: str
    decision: Any


def _request(action: str) -> dict[str, Any]:
    return {
        "action_request": {"action": action, "args": {"copies": 1}},
        "config": {
            "allow_accept": True,
            "allow_edit": True,
            "allow_respond": True,
            "allow_ignore": True,
        },
        "description": f"{action}?",
    }


async def _plan(state: GatedState, config) -> dict[str, Any]:
    log(state.get("dir"), "plan.log")
    gate_dir = state.get("dir") if "model" in (state.get("gates") or []) else None
    answer = await MODEL.ainvoke([HumanMessage(content="plan")], config, gate_dir=gate_dir)
    return {"plan": answer.content}


async def _approve(state: GatedState) -> dict[str, Any]:
    await asyncio.sleep(0)
    # The test may add to the request: approvals (four-eyes), expires_in, ...
    return {"decision": interrupt({**_request("publish"), **(state.get("request") or {})})}


async def _act(state: GatedState) -> dict[str, Any]:
    if (state.get("decision") or {}).get("type") in ("accept", "edit"):
        log(state.get("dir"), "published.log")
    await asyncio.sleep(0)
    return {}


async_gated_graph = (
    StateGraph(GatedState)
    .add_node("plan", _plan)
    .add_node("approve", _approve)
    .add_node("act", _act)
    .add_edge(START, "plan")
    .add_edge("plan", "approve")
    .add_edge("approve", "act")
    .add_edge("act", END)
    .compile()
)


def _sync_prepare(state: GatedState) -> dict[str, Any]:
    log(state.get("dir"), "prepare.log")
    return {"plan": f"prepared by {os.getpid()}"}


def _sync_act(state: GatedState) -> dict[str, Any]:
    if (state.get("decision") or {}).get("type") in ("accept", "edit"):
        log(state.get("dir"), "published.log")
    return {}


def _sync_plan(state: GatedState) -> dict[str, Any]:
    """A sync node that blocks its thread until its gate opens: a sync model SDK's call."""
    log(state.get("dir"), "plan.log")
    folder = Path(state["dir"])
    (folder / f"at-model-{os.getpid()}").touch()
    deadline = time.monotonic() + 120
    while not (folder / "open-model").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"plan": "a blocking plan"}


sync_gated_graph = (
    StateGraph(GatedState)
    .add_node("plan", _sync_plan)
    .add_node("approve", _approve)
    .add_edge(START, "plan")
    .add_edge("plan", "approve")
    .add_edge("approve", END)
    .compile()
)


mixed_graph = (
    StateGraph(GatedState)
    .add_node("prepare", _sync_prepare)
    .add_node("plan", _plan)
    .add_node("approve", _approve)
    .add_node("act", _sync_act)
    .add_edge(START, "prepare")
    .add_edge("prepare", "plan")
    .add_edge("plan", "approve")
    .add_edge("approve", "act")
    .add_edge("act", END)
    .compile()
)


# --- a ReAct agent with an async-only tool under require_approval -----------------------


async def _transfer(folder: str, amount: int) -> str:
    await asyncio.sleep(0)
    with (Path(folder) / "transfer.log").open("a") as fh:
        fh.write(f"{amount}\n")
    return f"transferred {amount}"


# Only a coroutine: this tool cannot run synchronously at all.
transfer = StructuredTool.from_function(
    coroutine=_transfer, name="transfer", description="Transfer money."
)


def _transfer_script(messages, tools):
    done = tool_results(messages).get("transfer")
    if done is not None:
        return reply(f"Done: {done.content}")
    return reply("Transferring.", ("transfer", {"folder": latest_request(messages), "amount": 5}))


async_tool_agent = build_react_agent(
    scripted_model("scripted", script=_transfer_script),
    [require_approval(transfer, description="Transfer {amount}?")],
    builtin_tools=False,
    name="transfer",
)


# --- a fleet of runs: await a model, then an approved async tool ------------------------


async def _gated_transfer(folder: str, amount: int) -> str:
    """Transfers, then (when the test armed it) awaits a gate before reporting back: a
    worker killed there has run the tool but not checkpointed it."""
    with (Path(folder) / "transfer.log").open("a") as fh:
        fh.write(f"{amount}\n")
    if (Path(folder) / "arm-after-transfer").exists():
        await agate(folder, "after-transfer")
    return f"transferred {amount}"


gated_transfer = StructuredTool.from_function(
    coroutine=_gated_transfer, name="transfer", description="Transfer money."
)


class FleetState(TypedDict, total=False):
    dir: str
    gates: list[str]
    messages: Annotated[list, add_messages]


async def _fleet_plan(state: FleetState, config) -> dict[str, Any]:
    log(state.get("dir"), "plan.log")
    gate_dir = state.get("dir") if "model" in (state.get("gates") or []) else None
    await MODEL.ainvoke([HumanMessage(content="plan")], config, gate_dir=gate_dir)
    call = {"name": "transfer", "args": {"folder": state["dir"], "amount": 5}, "id": "call_1"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


fleet_graph = (
    StateGraph(FleetState)
    .add_node("plan", _fleet_plan)
    .add_node("tools", approval_tool_node([require_approval(gated_transfer)]))
    .add_edge(START, "plan")
    .add_edge("plan", "tools")
    .add_edge("tools", END)
    .compile()
)


# --- the seed's pattern: interrupt, then the approved effect in the same node -----------


def _send(folder: str) -> str:
    path = Path(folder) / "effect.log"
    with path.open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    return f"sent #{path.read_text().count(chr(10))}"


def _seed_send(state: GatedState, config) -> dict[str, Any]:
    decision = interrupt(_request("send"))
    if decision.get("type") != "accept":
        return {"decision": decision}
    receipt = once(config, lambda: _send(state["dir"]), name="send")
    folder = Path(state["dir"])
    if (folder / "arm-after-effect").exists():
        # Killed here, the effect happened and the node's checkpoint did not.
        (folder / f"at-after-effect-{os.getpid()}").touch()
        deadline = time.monotonic() + 120
        while not (folder / "open-after-effect").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return {"decision": decision, "plan": receipt}


seed_once_graph = (
    StateGraph(GatedState)
    .add_node("send", _seed_send)
    .add_edge(START, "send")
    .add_edge("send", END)
    .compile()
)


# --- an MCP tool (langchain-mcp-adapters) under require_approval -------------------------


def mcp_agent():
    """A ReAct agent whose one tool comes from the MCP server at $HITL_TEST_MCP_URL.

    A factory: the registry builds it once per process, when first used.
    """
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient(
        {"bank": {"url": os.environ["HITL_TEST_MCP_URL"], "transport": "streamable_http"}}
    )
    [tool] = asyncio.run(client.get_tools())  # async only, like every MCP tool
    return build_react_agent(
        scripted_model("scripted", script=_transfer_script),
        [require_approval(tool, description="Transfer {amount}?")],
        builtin_tools=False,
        name="mcp",
    )
