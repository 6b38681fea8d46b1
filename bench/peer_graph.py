"""The graphs every system of bench/peers.py and bench/model_bound.py serves: the
cycle plan -> review (interrupt) -> act.

Django-free on purpose: `langgraph dev`, Aegra and HITL import this same file
(HITL through HITL_EXTRA_GRAPHS="cycle=bench.peer_graph:graph"). Compiled without a
checkpointer; each server binds its own. One file, not two: Aegra and `langgraph dev`
load it by path, where `bench` is no package to import from.

  graph      `plan` returns at once (bench/peers.py: what the servers cost)
  blocking   a sync `plan` that blocks L seconds (time.sleep), as a sync SDK call does
  awaited    an async `plan` that awaits L seconds (asyncio.sleep), as an async SDK call does
  streaming  an async `plan` that streams a fake chat model's tokens over L seconds

For the model-bound three, L comes with the input (`{"latency": 1.0}`), so one server
serves every latency. When BENCH_MODEL_TRACE names a file, each model call appends
"start end" (wall clock) to it, which is how bench/model_bound.py counts the model
calls in flight on the server side.

No `from __future__ import annotations`: Aegra loads this file with
spec_from_file_location under a module name it does not register, so string
annotations of the state could not be resolved there.
"""

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

TOKENS = 20
PLAN = {"action": "send_email", "args": {"to": "team@example.com", "n": 1}}


class CycleState(TypedDict, total=False):
    request: str
    latency: float
    plan: dict[str, Any]
    tokens: int
    decision: Any
    done: bool


def plan(state: CycleState) -> dict[str, Any]:
    return {"plan": PLAN}


def _trace(started: float) -> None:
    path = os.environ.get("BENCH_MODEL_TRACE")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{started:.4f} {time.time():.4f}\n")


def _latency(state: CycleState) -> float:
    return max(0.0, float(state.get("latency") or 0.0))


class FakeStreamingModel(BaseChatModel):
    """A chat model that answers TOKENS tokens spread evenly over `latency` seconds."""

    latency: float = 1.0

    @property
    def _llm_type(self) -> str:
        return "bench-fake-streaming"

    def _words(self) -> list[str]:
        return [f"tok{i} " for i in range(TOKENS)]

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kw):
        time.sleep(self.latency)
        text = "".join(self._words())
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(self, messages, stop=None, run_manager=None, **kw) -> Iterator[ChatGenerationChunk]:
        for word in self._words():
            time.sleep(self.latency / TOKENS)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk

    async def _astream(
        self, messages, stop=None, run_manager=None, **kw
    ) -> AsyncIterator[ChatGenerationChunk]:
        for word in self._words():
            await asyncio.sleep(self.latency / TOKENS)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                await run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk


def plan_blocking(state: CycleState) -> dict[str, Any]:
    started = time.time()
    time.sleep(_latency(state))
    _trace(started)
    return {"plan": PLAN}


async def plan_awaited(state: CycleState) -> dict[str, Any]:
    started = time.time()
    await asyncio.sleep(_latency(state))
    _trace(started)
    return {"plan": PLAN}


async def plan_streaming(state: CycleState) -> dict[str, Any]:
    started = time.time()
    model = FakeStreamingModel(latency=_latency(state))
    tokens = 0
    async for _chunk in model.astream([HumanMessage(content="Plan the email.")]):
        tokens += 1
    _trace(started)
    return {"plan": PLAN, "tokens": tokens}


def review(state: CycleState) -> dict[str, Any]:
    planned = state.get("plan") or {}
    answer = interrupt(
        [
            {
                "action_request": {
                    "action": planned.get("action", "send_email"),
                    "args": planned.get("args", {}),
                },
                "config": {
                    "allow_accept": True,
                    "allow_edit": True,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": f"Send the email for {state.get('request') or 'bench'}?",
            }
        ]
    )
    # langgraph's own servers hand back the resume value as sent (a list of one
    # HumanResponse); be lenient about a bare response too.
    if isinstance(answer, list) and answer:
        answer = answer[0]
    return {"decision": answer}


def act(state: CycleState) -> dict[str, Any]:
    decision = state.get("decision") or {}
    return {"done": isinstance(decision, dict) and decision.get("type") in ("accept", "edit")}


def cycle_graph(plan, act=act, state=CycleState) -> Any:
    """plan -> review (interrupt) -> act, compiled without a checkpointer."""
    return (
        StateGraph(state)
        .add_node("plan", plan)
        .add_node("review", review)
        .add_node("act", act)
        .add_edge(START, "plan")
        .add_edge("plan", "review")
        .add_edge("review", "act")
        .add_edge("act", END)
        .compile()
    )


graph = cycle_graph(plan)
blocking = cycle_graph(plan_blocking)
awaited = cycle_graph(plan_awaited)
streaming = cycle_graph(plan_streaming)
