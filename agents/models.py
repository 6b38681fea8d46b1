"""Chat models: a factory reading HITL_MODEL, and the offline scripted model.

HITL_MODEL="provider:model" (e.g. "openai:gpt-4o-mini") goes through langchain's
init_chat_model and needs the provider's package (`pip install 'hitl[openai]'`).
The default, "scripted", is a deterministic offline model that emits real tool calls
from a script, so the demo and the tests run with no network and no API key.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

from agents.tools.files import is_transient

SCRIPTED = "scripted"
SCRIPTED_LABEL = "scripted demo model"

# A script sees the conversation and the bound tools' names and returns the next
# message: text, tool calls, or both (see `reply`).
Script = Callable[[list[BaseMessage], list[str]], AIMessage]


class ModelConfigError(ValueError):
    pass


def reply(text: str = "", *calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """An AI message with optional tool calls, for scripts."""
    return AIMessage(
        content=text,
        tool_calls=[
            {"name": name, "args": args, "id": "", "type": "tool_call"} for name, args in calls
        ],
    )


def latest_turn(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages after the last user message."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage) and not is_transient(messages[index]):
            return list(messages[index + 1 :])
    return list(messages)


def tool_results(messages: Sequence[BaseMessage]) -> dict[str, ToolMessage]:
    """The latest result of each tool in the current turn, by tool name."""
    return {m.name or "": m for m in latest_turn(messages) if isinstance(m, ToolMessage)}


def latest_request(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and not is_transient(message):
            return message.text
    return ""


def echo_script(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
    """Default script: say what it is and finish with the request as the result."""
    request = latest_request(messages)
    if "finish" in tools and "finish" not in tool_results(messages):
        return reply(
            "I am the scripted demo model; set HITL_MODEL=provider:model for a real one.",
            ("finish", {"summary": f"Received: {request}"[:500], "result": {"request": request}}),
        )
    return reply(f"I am the scripted demo model. You said: {request}"[:2000])


def scripted_delay() -> float:
    """Seconds the scripted model takes per call ($HITL_SCRIPTED_DELAY, default 0): lets
    a demo or a test show what a page does while a real model thinks."""
    raw = os.environ.get("HITL_SCRIPTED_DELAY", "").strip() or "0"
    try:
        delay = float(raw)
    except ValueError:
        delay = -1.0
    if not math.isfinite(delay) or not 0 <= delay <= 600:
        raise ModelConfigError(
            f"HITL_SCRIPTED_DELAY must be a number of seconds from 0 to 600; got {raw!r}."
        )
    return delay


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model that follows a script and emits real tool calls."""

    script: Script = echo_script
    label: str = SCRIPTED_LABEL
    delay: float = 0.0
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.label}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:
        specs = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=specs, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.delay:
            time.sleep(self.delay)  # a slow model, on purpose
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, tools))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.delay:
            await asyncio.sleep(self.delay)  # awaited, as an async model SDK waits
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, tools))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """Only with a delay (`disable_streaming` otherwise): the reply's text arrives a
        word at a time over the delay, like a real model's tokens, then its tool calls."""
        chunks = self._chunks(self._reply(messages, tools))
        for pause, chunk in chunks:
            time.sleep(pause)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """_stream, awaiting between tokens instead of blocking a thread."""
        for pause, chunk in self._chunks(self._reply(messages, tools)):
            await asyncio.sleep(pause)
            yield chunk

    def _chunks(self, message: AIMessage) -> list[tuple[float, ChatGenerationChunk]]:
        """The reply as (pause before it, chunk): its words spread over the delay, then
        its tool calls whole."""
        words = re.findall(r"\S+\s*", message.text) or [""]
        out = [
            (self.delay / len(words), ChatGenerationChunk(message=AIMessageChunk(content=word)))
            for word in words
        ]
        tool_calls = ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                    for i, c in enumerate(message.tool_calls)
                ],
                response_metadata=message.response_metadata,
            )
        )
        return [*out, (0.0, tool_calls)]

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]] | None) -> AIMessage:
        names = [spec.get("function", spec).get("name", "") for spec in tools or []]
        message = self.script(list(messages), names)
        # Ids derive from the conversation length: deterministic and unique per thread.
        step = sum(isinstance(m, AIMessage) for m in messages)
        counter = itertools.count()
        message = AIMessage(
            content=message.content,
            tool_calls=[
                {**call, "id": call.get("id") or f"call_{step}_{next(counter)}"}
                for call in message.tool_calls
            ],
            response_metadata={"model_name": self.label},
        )
        return message


def get_model(spec: str | None = None, *, script: Script | None = None) -> BaseChatModel:
    """The chat model named by `spec` (default: $HITL_MODEL, else the scripted model)."""
    spec = (spec if spec is not None else os.environ.get("HITL_MODEL", "")).strip() or SCRIPTED
    if spec == SCRIPTED:
        delay = scripted_delay()
        # Streams (word by word) only when slowed down; otherwise one reply, as before.
        return ScriptedChatModel(
            script=script or echo_script, delay=delay, disable_streaming=not delay
        )
    provider, sep, name = spec.partition(":")
    if not sep or not provider or not name:
        raise ModelConfigError(
            f"HITL_MODEL must be 'scripted' or 'provider:model' (e.g. openai:gpt-4o-mini); "
            f"got {spec!r}."
        )
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(spec)
    except ImportError as exc:
        raise ModelConfigError(
            f"HITL_MODEL={spec!r} needs the {provider} integration package ({exc}). "
            f"Install it, e.g. pip install 'hitl[{provider}]'."
        ) from exc


def model_label(model: Any) -> str:
    """A human name for a model, for the UI (the scripted model says what it is)."""
    if isinstance(model, ScriptedChatModel):
        return model.label
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__
