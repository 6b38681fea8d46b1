"""The AG-UI endpoint against a real daphne server and a real Celery worker.

Every event on the wire is parsed with the ag-ui-protocol package's own models.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from ag_ui.core import Event, EventType, RunAgentInput
from asgiref.sync import async_to_sync
from pydantic import TypeAdapter

from hitl.core.live.waiting import ThreadSubscription
from hitl.core.models import HumanInterrupt, Thread
from tests.api.conftest import parse_sse, token_for

pytestmark = pytest.mark.postgres

EVENTS = TypeAdapter(Event)
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Look up the weather in the browser's widget.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def run_input(thread_id: str, **fields) -> dict:
    body = {"threadId": thread_id, "runId": f"run-{uuid.uuid4()}", "messages": [], "state": {}}
    body.update(fields)
    RunAgentInput.model_validate(body)  # what we send is valid AG-UI input, too
    return body


def post_run(base_url: str, key: str, graph: str, body: dict) -> list:
    response = httpx.post(
        f"{base_url}/agui/{graph}", json=body, headers={"x-api-key": key}, timeout=60
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [EVENTS.validate_python(data) for _, data in parse_sse(response.text)]
    assert events[0].type == EventType.RUN_STARTED
    assert (events[0].thread_id, events[0].run_id) == (body["threadId"], body["runId"])
    assert events[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    return events


def of_type(events, kind):
    return [e for e in events if e.type == kind]


def test_an_interrupt_and_its_resume_round_trip(live, reviewer):
    key = token_for(reviewer)
    thread_id = str(uuid.uuid4())
    first = post_run(live.base_url, key, "approval", run_input(thread_id, state={"request": "q3"}))

    finished = first[-1]
    assert finished.type == EventType.RUN_FINISHED
    assert finished.outcome.type == "interrupt"
    (item,) = finished.outcome.interrupts
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert item.id == str(row.pk)
    assert item.reason == "human_review"
    assert "send an email" in item.message
    assert item.response_schema["properties"]["type"]["enum"] == [
        "accept",
        "edit",
        "response",
        "ignore",
    ]
    assert of_type(first, EventType.STATE_SNAPSHOT)[-1].snapshot == {"request": "q3"}

    second = post_run(
        live.base_url,
        key,
        "approval",
        run_input(
            thread_id,
            resume=[
                {
                    "interruptId": item.id,
                    "status": "resolved",
                    "payload": {
                        "type": "edit",
                        "args": {
                            "action": "send_email",
                            "args": {"to": "cfo@example.com", "subject": "Q3"},
                        },
                    },
                }
            ],
        ),
    )
    assert second[-1].type == EventType.RUN_FINISHED
    assert second[-1].outcome.type == "success"
    snapshot = of_type(second, EventType.STATE_SNAPSHOT)[-1].snapshot
    assert snapshot["sent"] is True
    assert snapshot["decision"]["args"]["args"]["to"] == "cfo@example.com"
    assert [e.step_name for e in of_type(second, EventType.STEP_FINISHED)] == ["propose", "finish"]
    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == ("resolved", "edit", reviewer)


def test_a_cancelled_resume_entry_skips_the_action(live, reviewer):
    key = token_for(reviewer)
    thread_id = str(uuid.uuid4())
    first = post_run(live.base_url, key, "approval", run_input(thread_id, state={"request": "q1"}))
    (item,) = first[-1].outcome.interrupts
    second = post_run(
        live.base_url,
        key,
        "approval",
        run_input(thread_id, resume=[{"interruptId": item.id, "status": "cancelled"}]),
    )
    assert of_type(second, EventType.STATE_SNAPSHOT)[-1].snapshot["sent"] is False
    assert HumanInterrupt.objects.get(pk=item.id).response_type == "ignore"


def test_a_frontend_tool_round_trip(live, reviewer):
    key = token_for(reviewer)
    thread_id = f"chat-{uuid.uuid4()}"  # not a UUID: mapped to a thread per user
    ask = {"id": "m1", "role": "user", "content": '/get_weather {"city": "Paris"}'}
    first = post_run(
        live.base_url,
        key,
        "client_tools",
        run_input(thread_id, messages=[ask], tools=[WEATHER_TOOL]),
    )
    (start,) = of_type(first, EventType.TOOL_CALL_START)
    assert start.tool_call_name == "get_weather"
    args = "".join(e.delta for e in of_type(first, EventType.TOOL_CALL_ARGS))
    assert json.loads(args) == {"city": "Paris"}
    assert of_type(first, EventType.TOOL_CALL_END)[0].tool_call_id == start.tool_call_id
    (item,) = first[-1].outcome.interrupts
    assert (item.reason, item.tool_call_id) == ("tool_call", start.tool_call_id)
    assert item.message == WEATHER_TOOL["description"]

    # The client ran the tool; its result comes back as a tool message, as AG-UI clients send it.
    call = {
        "id": start.tool_call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": args},
    }
    history = [
        ask,
        {"id": start.parent_message_id, "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": start.tool_call_id, "content": "18°C and sunny"},
    ]
    second = post_run(
        live.base_url,
        key,
        "client_tools",
        run_input(thread_id, messages=history, tools=[WEATHER_TOOL]),
    )
    (result,) = of_type(second, EventType.TOOL_CALL_RESULT)
    assert (result.tool_call_id, result.content) == (start.tool_call_id, "18°C and sunny")
    text = "".join(e.delta for e in of_type(second, EventType.TEXT_MESSAGE_CONTENT))
    assert text == "The get_weather tool answered: 18°C and sunny"
    started = of_type(second, EventType.TEXT_MESSAGE_START)[0]
    assert of_type(second, EventType.TEXT_MESSAGE_END)[0].message_id == started.message_id
    assert second[-1].outcome.type == "success"
    thread = Thread.objects.get(pk=second[0].metadata["hitlThreadId"])
    assert thread.requester == reviewer
    # The client's copy of the tool result was not stored a second time.
    messages = of_type(second, EventType.STATE_SNAPSHOT)[-1].snapshot["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]

    # The next turn continues the same conversation.
    history.append({"id": started.message_id, "role": "assistant", "content": text})
    history.append({"id": "m2", "role": "user", "content": "thanks"})
    third = post_run(live.base_url, key, "client_tools", run_input(thread_id, messages=history))
    assert (
        "".join(e.delta for e in of_type(third, EventType.TEXT_MESSAGE_CONTENT))
        == "You said: thanks"
    )


def test_every_event_on_the_thread_stream_is_valid_ag_ui(live, reviewer):
    """What the thread WebSocket forwards (the worker's events) parses as AG-UI events."""
    key = token_for(reviewer)
    thread_id = str(uuid.uuid4())

    async def collect(body):
        async with ThreadSubscription(thread_id) as sub:
            async with httpx.AsyncClient(timeout=60) as client:
                response = await client.post(
                    f"{live.base_url}/agui/client_tools", json=body, headers={"x-api-key": key}
                )
                assert response.status_code == 200
            seen = []
            while (message := await sub.get(2.0)) is not None:
                if message["type"] == "thread.event":
                    seen.append(message["event"])
            return seen

    ask = {"id": "m1", "role": "user", "content": '/get_weather {"city": "Oslo"}'}
    raw = async_to_sync(collect)(run_input(thread_id, messages=[ask], tools=[WEATHER_TOOL]))
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    raw += async_to_sync(collect)(
        run_input(
            thread_id,
            resume=[{"interruptId": str(row.pk), "status": "resolved", "payload": "rain"}],
        )
    )
    parsed = [EVENTS.validate_python(event) for event in raw]
    kinds = {e.type for e in parsed}
    assert kinds >= {
        EventType.RUN_STARTED,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.STATE_SNAPSHOT,
        EventType.RUN_FINISHED,
    }
    finished = of_type(parsed, EventType.RUN_FINISHED)
    assert finished[0].outcome.type == "interrupt"
    assert finished[0].outcome.interrupts[0].id == str(row.pk)
    assert finished[-1].outcome.type == "success"


def test_bad_ag_ui_input_is_a_clear_4xx(live, reviewer, outsider):
    key = token_for(reviewer)
    url = f"{live.base_url}/agui"
    headers = {"x-api-key": key}
    assert httpx.post(f"{url}/approval", json={"threadId": "t"}, headers=headers).status_code == 422
    unknown = httpx.post(f"{url}/nope", json=run_input("t"), headers=headers)
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]
    assert httpx.post(f"{url}/approval", json=run_input("t")).status_code == 401
    bad_resume = httpx.post(
        f"{url}/approval",
        json=run_input(str(uuid.uuid4()), resume=[{"interruptId": "x", "status": "resolved"}]),
        headers=headers,
    )
    assert bad_resume.status_code == 404
    # Another user's thread is not found, even by its id.
    thread_id = str(uuid.uuid4())
    post_run(live.base_url, key, "approval", run_input(thread_id, state={"request": "x"}))
    theirs = httpx.post(
        f"{url}/approval", json=run_input(thread_id), headers={"x-api-key": token_for(outsider)}
    )
    assert theirs.status_code == 404
    waiting = httpx.post(f"{url}/approval", json=run_input(thread_id), headers=headers)
    assert waiting.status_code == 409
    assert Thread.objects.count() == 1
