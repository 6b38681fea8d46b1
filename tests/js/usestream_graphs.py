"""The graph the useStream page chats with (HITL_EXTRA_GRAPHS=USESTREAM_GRAPHS).

`gated_chat` answers the latest human message with a streamed reply, then asks for a
review in the older HumanInterrupt-list format (Agent Chat UI answers it with a list of
responses), then says what the reviewer answered. A message containing `hold:<name>`
stops its reply after HELD_AFTER tokens until the file `<USESTREAM_GATE_DIR>/<name>`
exists: the test holds a run mid-stream (to stop it, reload the page, restart the
server) and lets it go by creating that file, with no timing in the test. A run
cancelled while held leaves `<name>.cancelled` beside it.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

TARGETS = {"gated_chat": "tests.js.usestream_graphs:gated_chat_graph"}
USESTREAM_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())
GATE_DIR_ENV = "USESTREAM_GATE_DIR"
HELD_AFTER = 3
# A gate nobody opens gives up eventually: a failed test leaves no run behind for ever.
GATE_GIVES_UP_SECONDS = 300


def reply_to(request: str) -> str:
    """What the model answers to a request (the test compares the page with it)."""
    return f"Here is my answer to {request!r} in nine short words, word by word."


def _gate(request: str) -> Path | None:
    found = re.search(r"hold:([\w-]+)", request)
    if not found:
        return None
    return Path(os.environ[GATE_DIR_ENV]) / found.group(1)


def cancelled_marker(gate: Path) -> Path:
    """Written when the run is cancelled while held at `gate`."""
    return gate.with_name(f"{gate.name}.cancelled")


async def _wait_for_gate(gate: Path) -> None:
    deadline = time.monotonic() + GATE_GIVES_UP_SECONDS
    try:
        while not gate.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:  # the run was stopped here, mid-reply
        cancelled_marker(gate).touch()
        raise


class GatedModel(BaseChatModel):
    """A chat model that streams `reply` a word at a time, held at a gate if it has one."""

    reply: str
    gate: Path | None = None

    @property
    def _llm_type(self) -> str:
        return "gated"

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for index, word in enumerate(re.findall(r"\S+\s*", self.reply)):
            if index == HELD_AFTER and self.gate is not None:
                await _wait_for_gate(self.gate)
            yield ChatGenerationChunk(message=AIMessageChunk(content=word))


def _request(state: MessagesState) -> str:
    for message in reversed(state["messages"]):
        if isinstance(message, HumanMessage):
            return message.text
    return ""


async def _agent(state: MessagesState) -> dict[str, Any]:
    request = _request(state)
    model = GatedModel(reply=reply_to(request), gate=_gate(request))
    return {"messages": [await model.ainvoke(state["messages"])]}


def _review(state: MessagesState) -> dict[str, Any]:
    [response] = interrupt(
        [
            {
                "action_request": {"action": "send_reply", "args": {"to": "customer"}},
                "config": {
                    "allow_accept": True,
                    "allow_edit": False,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": "Send this reply to the customer?",
            }
        ]
    )
    return {"messages": [AIMessage(f"The reviewer answered: {response.get('type')}.")]}


_builder = StateGraph(MessagesState)
_builder.add_node("agent", _agent)
_builder.add_node("review", _review)
_builder.add_edge(START, "agent")
_builder.add_edge("agent", "review")
_builder.add_edge("review", END)
gated_chat_graph = _builder.compile()
