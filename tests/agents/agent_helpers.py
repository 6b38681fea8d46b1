"""Helpers for the agent tests: tool runtimes, scripted models, image bytes. No Django."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.prebuilt import ToolRuntime

from agents.models import ScriptedChatModel, reply
from agents.paths import FILES_KEY, LocalThreadFiles

Step = AIMessage | Callable[[list[BaseMessage]], AIMessage]


def config_for(files: LocalThreadFiles) -> dict[str, Any]:
    return {"configurable": {"thread_id": files.thread_id, FILES_KEY: files}}


def runtime_for(files: LocalThreadFiles, *, state: dict | None = None, call_id: str = "call_1"):
    return ToolRuntime(
        state=state or {},
        context=None,
        config=config_for(files),
        stream_writer=lambda _chunk: None,
        tool_call_id=call_id,
        store=None,
    )


def invoke_tool(tool, files: LocalThreadFiles, state: dict | None = None, **args: Any):
    """Invoke a tool as ToolNode would (a tool call with the runtime injected)."""
    return tool.invoke(
        {
            "type": "tool_call",
            "name": tool.name,
            "id": "call_1",
            "args": {**args, "runtime": runtime_for(files, state=state)},
        }
    )


def steps_model(*steps: Step, seen: list | None = None) -> ScriptedChatModel:
    """A scripted model that plays `steps` in order (one per model call), then says done."""

    calls = seen if seen is not None else []

    def script(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
        index = len(calls)  # one step per model call (a graph resumes, it never re-calls)
        calls.append(list(messages))
        if index >= len(steps):
            return reply("done")
        step = steps[index]
        return step(messages) if callable(step) else step

    return ScriptedChatModel(script=script)


def image_bytes(fmt: str, size: Sequence[int] = (8, 6)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", tuple(size), "orange").save(out, format=fmt)
    return out.getvalue()
