"""Every LangGraph stream mode through /langgraph, checked against langgraph itself: the
same graph streamed in-process (`graph.stream(..., subgraphs=True)`) is the reference,
and what the real langgraph_sdk reads from daphne + a Celery worker must equal it, ids
and timestamps aside."""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from typing import Any

import httpx
import pytest

from hitl.core.models import Run
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401

pytestmark = pytest.mark.postgres

MODES = ["values", "updates", "custom", "debug", "tasks", "checkpoints", "messages-tuple"]

_ID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}"
    r"|lc_run--[0-9a-f-]{36}|\d{4}-\d\d-\d\dT[\d:.]+\+00:00"
)


def _json(value: Any) -> Any:
    """A chunk as JSON, the way a server serializes it (messages, Interrupt dataclasses)."""

    def default(obj: Any) -> Any:
        if hasattr(obj, "model_dump"):
            return obj.model_dump(mode="json")
        if dataclasses.is_dataclass(obj):
            return dataclasses.asdict(obj)
        return list(obj) if isinstance(obj, (tuple, set)) else str(obj)

    return json.loads(json.dumps(value, default=default))


class _Normalizer:
    """Replaces ids and timestamps by their order of first appearance in one stream."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def _id(self, match: re.Match) -> str:
        return self.seen.setdefault(match.group(0), f"<{len(self.seen)}>")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return _ID.sub(self._id, value)
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                # HITL's own run metadata (LangGraph Server adds its own keys likewise).
                if key.startswith("hitl_"):
                    continue
                out[self(key)] = self(item)
            return out
        return value


def _undo_server_debug(data: dict[str, Any]) -> dict[str, Any]:
    """Check and take back what LangGraph Server adds to a debug checkpoint payload."""
    payload = data.get("payload")
    if data.get("type") != "checkpoint":
        return data
    config, parent = payload.pop("config"), payload.pop("parent_config")
    checkpoint, parent_checkpoint = payload.pop("checkpoint"), payload.pop("parent_checkpoint")
    assert checkpoint["checkpoint_id"] == config["configurable"]["checkpoint_id"]
    assert checkpoint["checkpoint_ns"] == config["configurable"]["checkpoint_ns"]
    if parent is None:
        assert parent_checkpoint is None
    else:
        assert parent_checkpoint["checkpoint_id"] == parent["configurable"]["checkpoint_id"]
    for task in payload["tasks"]:
        if "checkpoint" in task:  # a subgraph's task: its `state` config, renamed
            task["state"] = {"configurable": task.pop("checkpoint")}
    return {**data, "payload": {"config": config, "parent_config": parent, **payload}}


def _in_process() -> tuple[Any, dict[str, Any]]:
    """The nested graph on an in-memory checkpointer, and a config like the worker's."""
    from importlib.metadata import version

    from langgraph.checkpoint.memory import InMemorySaver

    from tests.api.client_graphs import _outer

    config = {
        # As LangGraph Server, the worker's configurable has the SDK's user-agent header.
        "configurable": {
            "thread_id": str(uuid.uuid4()),
            "user-agent": f"langgraph-sdk-py/{version('langgraph-sdk')}",
        },
        # Run metadata as HITL's worker gives it (the normalizer drops its values).
        "metadata": {"hitl_run_id": "", "hitl_thread_id": ""},
    }
    return _outer.compile(checkpointer=InMemorySaver()), config


def _stream(sdk, thread_id: str, stream_mode: Any, **kwargs: Any) -> list[Any]:
    return list(
        sdk.runs.stream(
            thread_id, "nested", stream_mode=stream_mode, stream_subgraphs=True, **kwargs
        )
    )


def _reference(graph, graph_input, config) -> list[tuple[str, Any]]:
    """What LangGraph Server sends for these modes with stream_subgraphs, from langgraph."""
    modes = ["messages" if m == "messages-tuple" else m for m in MODES]
    out = []
    for ns, mode, chunk in graph.stream(graph_input, config, stream_mode=modes, subgraphs=True):
        out.append(("|".join([mode, *ns]), _json(chunk)))
    return out


def _received(parts) -> list[tuple[str, Any]]:
    out = []
    for part in parts:
        assert part.id, part  # every part can be resumed from (Last-Event-ID)
        data = part.data
        if part.event.split("|")[0] == "debug":
            data = _undo_server_debug(json.loads(json.dumps(data)))
        out.append((part.event, data))
    return out


def _same(got: list[tuple[str, Any]], want: list[tuple[str, Any]]) -> None:
    got, want = _Normalizer()(got), _Normalizer()(want)
    assert [e for e, _ in got] == [e for e, _ in want]
    for n, ((event, data), (_, expected)) in enumerate(zip(got, want, strict=True)):
        assert data == expected, (n, event)


def test_every_stream_mode_matches_langgraph_through_a_pause_and_a_resume(stack16, reviewer):  # noqa: F811
    from langgraph.types import Command

    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    first = _stream(sdk, thread_id, MODES, input={"request": "q3"})
    assert first[0].event == "metadata"
    run_id = first[0].data["run_id"]
    # The worker was told what this client asked for: nothing else asks it of the worker.
    assert Run.objects.get(pk=run_id).stream_modes == MODES

    graph, config = _in_process()
    want = _reference(graph, {"request": "q3"}, config)
    _same(_received(first[1:]), want)
    # The pause ends every mode as LangGraph does: the subgraph's and the root's values
    # carry the interrupt, as do the updates and the interrupted tasks.
    names = [p.event.split("|")[0] for p in first]
    assert set(names) == {"metadata", "messages", *MODES} - {"messages-tuple"}
    assert any(p.event.startswith("messages|review:") for p in first)  # the subgraph's model
    assert names[-4:] == ["updates", "values", "tasks", "debug"]
    assert "__interrupt__" in first[-3].data and first[-2].data["interrupts"]

    # The resume answers the interrupt; the graph goes on inside the subgraph.
    second = _stream(sdk, thread_id, MODES, command={"resume": {"type": "accept", "args": None}})
    decision = sdk.threads.get_state(thread_id)["values"]["decision"]
    pending = graph.get_state(config).interrupts[0].id
    want = _reference(graph, Command(resume={pending: decision}), config)
    _same(_received(second[1:]), want)
    assert second[-1].event == "debug" and second[-1].data["payload"]["next"] == []


def test_a_run_keeps_the_modes_it_asked_for_and_no_subgraphs_unasked(stack16, reviewer):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    parts = list(
        sdk.runs.stream(
            thread_id, "nested", input={"request": "q3"}, stream_mode=["values", "updates"]
        )
    )
    assert Run.objects.get(pk=parts[0].data["run_id"]).stream_modes == ["values", "updates"]
    # Without stream_subgraphs, no subgraph chunk: the root's updates end with the pause.
    assert all("|" not in p.event for p in parts)
    assert parts[-1].event == "values" and "__interrupt__" in parts[-1].data
    assert [p.data for p in parts if p.event == "updates"][-1].keys() == {"__interrupt__"}


def test_unknown_stream_modes_are_refused(stack16, reviewer, outsider):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    headers = {"x-api-key": token_for(reviewer)}
    base = f"{stack16.base_url}/langgraph/threads/{thread_id}"
    for stream_mode in ("bogus", ["values", "bogus"], ["values", 3]):
        body = {"assistant_id": "nested", "input": {}, "stream_mode": stream_mode}
        response = httpx.post(f"{base}/runs/stream", json=body, headers=headers, timeout=30)
        assert response.status_code == 422, response.text
        assert "stream_mode" in response.text
    response = httpx.get(f"{base}/stream?stream_mode=debug&stream_mode=bogus", headers=headers)
    assert response.status_code == 422
    assert not Run.objects.filter(thread_id=thread_id).exists()
    # Another user's thread stays out of sight, whatever the modes.
    response = httpx.get(
        f"{base}/stream?stream_mode=debug", headers={"x-api-key": token_for(outsider)}
    )
    assert response.status_code == 404


def _server_messages(chunks) -> list[tuple[str, Any]]:
    """LangGraph Server's `messages` mode from langgraph's message chunks: metadata once
    per message, then the message so far as `messages/partial` after each chunk."""
    from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

    so_far: dict[str, Any] = {}
    out: list[tuple[str, Any]] = []
    for message, metadata in chunks:
        if message.id in so_far:
            so_far[message.id] += message
        else:
            so_far[message.id] = message
            out.append(("messages/metadata", {message.id: {"metadata": metadata}}))
        partial = isinstance(message, BaseMessageChunk)
        event = "messages/partial" if partial else "messages/complete"
        out.append((event, [_json(message_chunk_to_message(so_far[message.id]))]))
    return out


def test_the_messages_mode_builds_messages_as_langgraph_server_does(stack16, reviewer):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    parts = _stream(sdk, thread_id, "messages", input={"request": "q3"})
    graph, config = _in_process()
    stream = graph.stream({"request": "q3"}, config, stream_mode="messages", subgraphs=True)
    chunks = [chunk for _, chunk in stream]
    want = _server_messages(chunks)
    assert [e for e, _ in want].count("messages/partial") > 2
    _same(_received(parts[1:]), want)
    assert parts[-1].data[0]["content"] == "draft for the board"
    assert parts[-1].data[0]["type"] == "ai"


def _reference_events(
    graph, graph_input, config, modes: list[str], subgraphs: bool = True
) -> list[tuple[str, Any]]:
    """What LangGraph Server sends for `events` (with `modes`, stream_subgraphs): it runs
    `astream_events` v2 with the run's id as the root run id; the root's on_chain_stream
    events are the other modes' chunks, every other event is an `events` part."""
    import asyncio

    run_id = uuid.uuid4()
    asked = [m for m in modes if m != "events"]

    async def collect() -> list[tuple[str, Any]]:
        out = []
        async for event in graph.astream_events(
            graph_input,
            {**config, "run_id": run_id},
            version="v2",
            stream_mode=[*asked, "debug"],
            subgraphs=subgraphs,
        ):
            if event["event"] == "on_chain_stream" and event["run_id"] == str(run_id):
                chunk = event["data"]["chunk"]
                ns, mode, chunk = chunk if subgraphs else ((), *chunk)
                if mode in asked:
                    out.append(("|".join([mode, *ns]), _json(chunk)))
            else:
                out.append(("events", _json(event)))
        return out

    return asyncio.run(collect())


EVENT_MODES = ["events", "values", "updates"]


def _same_events(got: list[tuple[str, Any]], want: list[tuple[str, Any]]) -> None:
    """The events, and the other modes' parts, each in LangGraph's order. How the two
    interleave is not LangGraph's to fix either: a sync node's callbacks come from an
    executor thread while the stream's chunks come from the loop."""
    for events in (True, False):
        _same(
            [p for p in got if (p[0] == "events") == events],
            [p for p in want if (p[0] == "events") == events],
        )


def test_the_events_mode_is_langgraphs_astream_events_tree(stack16, reviewer):  # noqa: F811
    from langgraph.types import Command

    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    first = _stream(sdk, thread_id, EVENT_MODES, input={"request": "q3"})
    run_id = first[0].data["run_id"]
    assert Run.objects.get(pk=run_id).stream_modes == EVENT_MODES

    graph, config = _in_process()
    want = _reference_events(graph, {"request": "q3"}, config, EVENT_MODES)
    got = _received(first[1:])
    _same_events(got, want)
    events = [data for event, data in got if event == "events"]
    # The whole tree, as only astream_events gives it: the root chain opens with the
    # run's own id, the subgraph's chat model streams its tokens, nodes start and end.
    assert events[0]["event"] == "on_chain_start" and events[0]["run_id"] == run_id
    assert events[0]["parent_ids"] == []
    kinds = {(e["event"], e["name"]) for e in events}
    assert {("on_chain_start", "prepare"), ("on_chain_end", "prepare")} <= kinds
    assert ("on_chain_start", "draft") in kinds
    tokens = [e for e in events if e["event"] == "on_chat_model_stream"]
    assert len(tokens) > 2 and tokens[0]["metadata"]["langgraph_node"] == "draft"
    assert "".join(t["data"]["chunk"]["content"] for t in tokens) == "draft for the board"

    # The resume streams the rest of the tree, the root's end included.
    second = _stream(
        sdk, thread_id, EVENT_MODES, command={"resume": {"type": "accept", "args": None}}
    )
    pending = graph.get_state(config).interrupts[0].id
    decision = sdk.threads.get_state(thread_id)["values"]["decision"]
    want = _reference_events(graph, Command(resume={pending: decision}), config, EVENT_MODES)
    got = _received(second[1:])
    _same_events(got, want)
    last = [data for event, data in got if event == "events"][-1]
    assert last["event"] == "on_chain_end" and last["run_id"] == second[0].data["run_id"]
    assert last["data"]["output"]["steps"] == ["prepare", "finish"]


def test_the_events_mode_alone_sends_only_events(stack16, reviewer):  # noqa: F811
    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    parts = list(
        sdk.runs.stream(thread_id, "nested", input={"request": "q3"}, stream_mode="events")
    )
    graph, config = _in_process()
    want = _reference_events(graph, {"request": "q3"}, config, ["events"], subgraphs=False)
    _same(_received(parts[1:]), want)
    assert {p.event for p in parts[1:]} == {"events"}


def test_the_react_agents_model_streams_tokens_as_langgraph_server_does(stack16, reviewer):  # noqa: F811
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver

    from tests.api.client_graphs import react_streaming

    sdk = sdk_client(stack16.base_url, reviewer)
    thread_id = sdk.threads.create()["thread_id"]
    parts = list(
        sdk.runs.stream(
            thread_id, "react_streaming", input={"request": "q3"}, stream_mode="messages"
        )
    )
    graph = react_streaming(InMemorySaver())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}

    async def collect() -> list[Any]:
        stream = graph.astream({"request": "q3"}, config, stream_mode="messages")
        return [chunk async for chunk in stream]

    want = _server_messages(asyncio.run(collect()))
    _same(_received(parts[1:]), want)
    # The model's reply came a word at a time, then whole with its tool call.
    partial = [data for event, data in _received(parts[1:]) if event == "messages/partial"]
    assert len(partial) > 5
    assert partial[0][0]["content"] != partial[-1][0]["content"]
    assert partial[-1][0]["tool_calls"][0]["name"] == "finish"
