"""The Agent Inbox answers HITL's pauses with its exact request bodies, against daphne
and a Celery worker: `demo_v1` (LangChain v1 `create_agent` + the stock
`HumanInTheLoopMiddleware`) with each decision its review config allows, and `approval`
(a HumanInterrupt); the inbox lists the pause as it lists interrupted threads, reads the
fields it reads, answers as it answers, and the agent resumes with that answer, recorded
once and audited.

What the inbox reads and sends is langchain-ai/agent-inbox's, read at two commits of
`src/components/agent-inbox/`: `contexts/utils.ts` `normalizeInterrupt` turns a middleware
pause into a HumanInterrupt from the first action request (`allow_respond` from "reject",
no ignore), taking its args from `arguments` (1141fd0, the released inbox) or from `args`,
else `arguments` (0263e34f, an unmerged branch). LangChain's middleware sends only `args`,
so HITL's `Thread.interrupts` (where the inbox reads: `threads.search`, `threads.get`)
adds `arguments`; state and streams keep the graph's own value. On answering,
`hooks/use-interrupted-actions.tsx` and `contexts/ThreadContext.tsx` send
`{decisions: [{...response, type}]}` for a middleware pause (accept as "approve", its
text response as "reject" carrying the text in `args`) and `[response]` for a
HumanInterrupt, over `runs.stream(..., streamMode: "events")`; its Ignore button is always
shown and sends `{type: "ignore"}` through `runs.create`.
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


def _normalized(value: dict[str, Any], *, released: bool) -> dict[str, Any]:
    """The inbox's `normalizeInterrupt` of a middleware pause: what it shows and allows
    (`released`: the released inbox, which reads only `arguments`)."""
    request = value["action_requests"][0]
    allowed = value["review_configs"][0]["allowed_decisions"]
    if released:
        args = request.get("arguments") or {}
    else:
        args = request.get("args") or request.get("arguments") or {}
    return {
        "action_request": {"action": request["name"], "args": args},
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


def _listed(live, user, thread_id: str, graph: str = GRAPH) -> dict[str, Any]:
    """The thread as the inbox's "interrupted" tab lists it (fetchThreads' search), which
    is also what it reads again when it opens the thread (fetchSingleThread's get)."""
    body = {"metadata": {"graph_id": graph}, "limit": 10, "offset": 0, "status": "interrupted"}
    found = _post(live.base_url, user, "/threads/search", body)
    assert found.status_code == 200, found.text
    (thread,) = [t for t in found.json() if t["thread_id"] == thread_id]
    opened = httpx.get(
        f"{live.base_url}/langgraph/threads/{thread_id}",
        headers={"x-api-key": token_for(user)},
        timeout=60,
    )
    assert opened.status_code == 200, opened.text
    assert opened.json()["interrupts"] == thread["interrupts"]
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
    # The args under both names: the released inbox and the branch show the same.
    (request,) = item["value"]["action_requests"]
    assert request["arguments"] == request["args"]
    shown = _normalized(item["value"], released=True)
    assert _normalized(item["value"], released=False) == shown
    # The state keeps the graph's own value, as LangGraph Server shows it.
    state = sdk_client(live.base_url, reviewer).threads.get_state(thread_id)
    (task,) = [t for t in state["tasks"] if t["interrupts"]]
    (graphs_request,) = task["interrupts"][0]["value"]["action_requests"]
    assert "arguments" not in graphs_request
    assert graphs_request["args"] == request["args"]
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


def test_the_inbox_shows_and_edits_a_human_interrupt_with_the_args_it_ran_with(live, reviewer):
    """`approval` pauses with a HumanInterrupt: the inbox reads `action_request.args` and
    `config` as they are, and its edit (the changed field as typed text, the rest as
    they came) resumes the graph with the edited args."""
    client = sdk_client(live.base_url, reviewer)
    thread = _post(live.base_url, reviewer, "/threads", {"metadata": {"graph_id": "approval"}})
    thread_id = thread.json()["thread_id"]
    run = _post(
        live.base_url,
        reviewer,
        f"/threads/{thread_id}/runs",
        {"input": {"request": "q3 numbers"}, "assistant_id": "approval"},
    )
    assert run.status_code == 200, run.text
    client.runs.join(thread_id, run.json()["run_id"])

    ((item,),) = _listed(live, reviewer, thread_id, "approval")["interrupts"].values()
    shown = item["value"]  # getInterruptFromThread: `action_request` and `config`, as is
    assert "action_requests" not in shown  # not a middleware pause: normalizeInterrupt skips it
    assert shown["action_request"] == {
        "action": "send_email",
        "args": {
            "to": "team@example.com",
            "subject": "Re: q3 numbers",
            "copies": 1,
            "urgent": False,
        },
    }
    assert shown["config"] == {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": True,
    }
    assert "send an email" in shown["description"]

    edit = {
        "type": "edit",
        "args": {
            "action": "send_email",
            "args": {**shown["action_request"]["args"], "to": "cfo@example.com"},
        },
    }
    body = {"command": {"resume": [edit]}, "stream_mode": "events", "assistant_id": "approval"}
    response = _post(live.base_url, reviewer, f"/threads/{thread_id}/runs/stream", body)
    assert response.status_code == 200, response.text
    assert not [data for event, data in parse_sse(response.text) if event == "error"]

    row = HumanInterrupt.objects.get(thread_id=thread_id)
    assert (row.status, row.response_type) == ("resolved", "edit")
    values = client.threads.get_state(thread_id)["values"]
    assert values["sent"] is True
    assert values["result"]["decision"] == {
        "type": "edit",
        "args": {
            "action": "send_email",
            "args": {
                "to": "cfo@example.com",
                "subject": "Re: q3 numbers",
                "copies": 1,
                "urgent": False,
            },
        },
    }
    assert AuditEvent.objects.filter(thread_id=thread_id, kind="interrupt.answered").count() == 1


def test_a_pause_with_two_actions_shows_the_first_and_its_one_decision_is_refused(live, reviewer):
    """The inbox shows only the first of a middleware pause's action requests and answers
    with one decision; HITL asks for one per action and records nothing."""
    thread = _post(
        live.base_url, reviewer, "/threads", {"metadata": {"graph_id": "middleware_review"}}
    )
    thread_id = thread.json()["thread_id"]
    run = _post(
        live.base_url,
        reviewer,
        f"/threads/{thread_id}/runs",
        {"input": {}, "assistant_id": "middleware_review"},
    )
    assert run.status_code == 200, run.text
    sdk_client(live.base_url, reviewer).runs.join(thread_id, run.json()["run_id"])

    ((item,),) = _listed(live, reviewer, thread_id, "middleware_review")["interrupts"].values()
    shown = _normalized(item["value"], released=True)
    assert shown["action_request"] == {
        "action": "write_file",
        "args": {"path": "notes.md", "text": "hello"},
    }

    resume = {"decisions": [_inbox_decision("approve", shown)]}
    body = {"command": {"resume": resume}, "stream_mode": "events"}
    body["assistant_id"] = "middleware_review"
    response = _post(live.base_url, reviewer, f"/threads/{thread_id}/runs/stream", body)
    assert response.status_code == 400, response.text
    assert "asks for 2 decisions" in response.text
    assert not HumanInterrupt.objects.filter(thread_id=thread_id).exclude(status="pending")
    assert not Run.objects.filter(thread_id=thread_id, kind="resume").exists()
