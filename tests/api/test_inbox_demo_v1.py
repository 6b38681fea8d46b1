"""The Agent Inbox answers `demo_v1` (LangChain v1 `create_agent` +
`HumanInTheLoopMiddleware`) with its exact request bodies, against daphne and a Celery
worker: the pause is listed as the inbox lists interrupted threads, each decision the
review config allows (approve, edit, reject) goes back as the inbox sends it, the agent
resumes with that decision, and the HumanInterrupt is answered once and audited.

The bodies are those of langchain-ai/agent-inbox (`ThreadContext.tsx`): the inbox reads a
middleware pause through `normalizeInterrupt` (the first action request; `allow_respond`
from "reject"; no ignore) and sends `sendHumanResponse(..., {isHitlMiddleware: true})`:
`{decisions: [{...response, type}]}` with accept as "approve" and its text response as
"reject" carrying the text in `args`, over `runs.stream(..., streamMode: "events")`.
Its Ignore button is always shown and sends `{type: "ignore"}`: a reject without reason.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from tests.api.conftest import parse_sse, sdk_client, token_for

pytestmark = pytest.mark.postgres

GRAPH = "demo_v1"
REASON = "Hold it until Monday."


def _post(base_url: str, user, path: str, body: dict) -> httpx.Response:
    """POST exactly the JSON the inbox's @langchain/langgraph-sdk client sends."""
    return httpx.post(
        f"{base_url}/langgraph{path}",
        content=json.dumps(body),
        headers={"Content-Type": "application/json", "x-api-key": token_for(user)},
        timeout=60,
    )


def _normalized(value: dict[str, Any]) -> dict[str, Any]:
    """The inbox's `normalizeInterrupt` of a middleware pause: what it shows and allows."""
    request = value["action_requests"][0]
    allowed = value["review_configs"][0]["allowed_decisions"]
    return {
        "action_request": {"action": request["name"], "args": request["args"]},
        "config": {
            "allow_accept": "approve" in allowed,
            "allow_edit": "edit" in allowed,
            "allow_respond": "reject" in allowed,
            "allow_ignore": False,
        },
        "description": request.get("description"),
    }


def _paused_thread(live, user) -> str:
    # threads.create({graphId}) of the JS SDK, then runs.create(thread, graph, {input}).
    thread = _post(live.base_url, user, "/threads", {"metadata": {"graph_id": GRAPH}})
    assert thread.status_code == 200, thread.text
    thread_id = thread.json()["thread_id"]
    body = {
        "input": {"messages": [{"role": "user", "content": "Send the Q4 report."}]},
        "assistant_id": GRAPH,
    }
    run = _post(live.base_url, user, f"/threads/{thread_id}/runs", body)
    assert run.status_code == 200, run.text
    values = sdk_client(live.base_url, user).runs.join(thread_id, run.json()["run_id"])
    assert "__interrupt__" in values, values
    return thread_id


def _listed(live, user, thread_id: str) -> dict[str, Any]:
    """The thread as the inbox's "interrupted" tab lists it (fetchThreads' search)."""
    body = {"metadata": {"graph_id": GRAPH}, "limit": 10, "offset": 0, "status": "interrupted"}
    found = _post(live.base_url, user, "/threads/search", body)
    assert found.status_code == 200, found.text
    (thread,) = [t for t in found.json() if t["thread_id"] == thread_id]
    return thread


def _inbox_decision(kind: str, shown: dict[str, Any]) -> dict[str, Any]:
    """One decision as the inbox's handleSubmit builds it, then maps it for the middleware."""
    request = shown["action_request"]
    if kind == "approve":  # "accept" with edits allowed and none made: the args go along
        return {"type": "approve", "args": request}
    if kind == "edit":  # the edited field as the text box holds it, the rest as they came
        return {
            "type": "edit",
            "args": {**request, "args": {**request["args"], "to": "cfo@example.com"}},
        }
    if kind == "ignore":  # its Ignore button, shown whatever the config (handleIgnore)
        return {"type": "ignore", "args": None}
    return {"type": "reject", "args": REASON}  # its "response" text box


EXPECTED = {
    "approve": (
        "accept",
        {"type": "approve"},
        "Sent the Q4 2025 sales report to finance-team@example.com",
    ),
    "edit": ("edit", None, "Sent the Q4 2025 sales report to cfo@example.com"),
    "reject": (
        "ignore",
        {"type": "reject", "message": REASON},
        f"The email was not sent: User rejected the tool call for `send_email` with reason: {REASON}",
    ),
    "ignore": ("ignore", {"type": "reject"}, "The email was not sent: User rejected"),
}


@pytest.mark.parametrize("kind", ["approve", "edit", "reject", "ignore"])
def test_the_inbox_answers_demo_v1_with_each_decision_it_allows(live, reviewer, kind):
    thread_id = _paused_thread(live, reviewer)
    listed = _listed(live, reviewer, thread_id)
    assert listed["status"] == "interrupted"
    assert listed["metadata"]["graph_id"] == GRAPH
    ((item,),) = listed["interrupts"].values()
    shown = _normalized(item["value"])
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert item["id"] == row.interrupt_id
    assert shown["action_request"]["action"] == "send_email"
    assert shown["action_request"]["args"]["to"] == "finance-team@example.com"
    assert shown["config"] == {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": False,
    }
    assert "send the sales report by email" in shown["description"]

    resume = {"decisions": [_inbox_decision(kind, shown)]}
    if kind == "ignore":  # handleIgnore: sendHumanResponse without stream, runs.create
        path, body = f"/threads/{thread_id}/runs", {"command": {"resume": resume}}
    else:  # handleSubmit: runs.stream(..., {command, streamMode: "events"})
        path, body = f"/threads/{thread_id}/runs/stream", {"command": {"resume": resume}}
        body["stream_mode"] = "events"
    body["assistant_id"] = GRAPH
    response = _post(live.base_url, reviewer, path, body)
    assert response.status_code == 200, response.text
    if kind == "ignore":
        sdk_client(live.base_url, reviewer).runs.join(thread_id, response.json()["run_id"])
    else:
        parts = parse_sse(response.text)
        assert not [data for event, data in parts if event == "error"]
        assert {data["event"] for event, data in parts if event == "events"} >= {
            "on_chain_start",
            "on_chain_end",
        }

    response_type, sent, says = EXPECTED[kind]
    row.refresh_from_db()
    assert (row.status, row.response_type) == ("resolved", response_type)
    assert Thread.objects.get(pk=thread_id).status == "done"
    (resume_run,) = Run.objects.filter(thread_id=thread_id, kind="resume")
    (decisions,) = [v["decisions"] for v in resume_run.input["resume"].values()]
    if sent is None:
        assert decisions[0]["type"] == "edit"
        assert decisions[0]["edited_action"]["name"] == "send_email"
        assert decisions[0]["edited_action"]["args"]["to"] == "cfo@example.com"
    else:
        assert decisions == [sent]
    state = sdk_client(live.base_url, reviewer).threads.get_state(thread_id)
    assert says in state["values"]["messages"][-1]["content"]
    answered = AuditEvent.objects.filter(thread_id=thread_id, kind="interrupt.answered")
    assert answered.count() == 1

    # The inbox sending it again (a double click, a stale tab) changes nothing.
    again = _post(live.base_url, reviewer, path, body)
    assert again.status_code in (400, 409), again.text
    assert Run.objects.filter(thread_id=thread_id, kind="resume").count() == 1
    assert answered.count() == 1
