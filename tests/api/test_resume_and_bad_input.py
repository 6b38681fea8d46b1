"""The LangGraph-compatible API in-process: resume shapes per interrupt kind, and bad input.

Runs execute in this process (`manual_runs`); no server or worker is needed.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from tests.api.conftest import token_for


class LangGraphClient:
    """The /langgraph/ API through Django's test client, authenticated like langgraph_sdk."""

    def __init__(self, user=None, key: str | None = None):
        self.client = Client()
        self.headers = {}
        if user is not None or key is not None:
            self.headers["HTTP_X_API_KEY"] = key or token_for(user)

    def get(self, path: str, **params):
        return self.client.get(f"/langgraph{path}", params, **self.headers)

    def post(self, path: str, data=None, *, raw: bytes | str | None = None):
        body = raw if raw is not None else json.dumps(data if data is not None else {})
        return self.client.post(
            f"/langgraph{path}", body, content_type="application/json", **self.headers
        )


@pytest.fixture
def lg(db):
    return LangGraphClient


def start(client: LangGraphClient, execute, graph: str, input: dict | None = None) -> str:
    thread_id = client.post("/threads", {}).json()["thread_id"]
    created = client.post(
        f"/threads/{thread_id}/runs", {"assistant_id": graph, "input": input or {}}
    )
    assert created.status_code == 200, created.content
    assert execute(created.json()["run_id"]) == "interrupted"
    return thread_id


def resume(client: LangGraphClient, execute, thread_id: str, graph: str, value) -> dict:
    created = client.post(
        f"/threads/{thread_id}/runs", {"assistant_id": graph, "command": {"resume": value}}
    )
    assert created.status_code == 200, created.content
    execute(created.json()["run_id"])
    return Run.objects.get(pk=created.json()["run_id"]).result


def test_middleware_decisions_map_onto_each_request(lg, manual_runs, reviewer):
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "middleware_review")
    rows = list(HumanInterrupt.objects.filter(thread_id=thread_id).order_by("position"))
    assert [r.action for r in rows] == ["write_file", "run_shell"]

    result = resume(
        client,
        manual_runs,
        thread_id,
        "middleware_review",
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {"name": "write_file", "args": {"path": "n.md", "text": "hi"}},
                },
                {"type": "reject", "message": "Not on this machine."},
            ]
        },
    )

    assert result["decisions"][0] == {
        "type": "edit",
        "edited_action": {"name": "write_file", "args": {"path": "n.md", "text": "hi"}},
    }
    # A rejection stays one, with its reason (never turned into a `respond`).
    assert result["decisions"][1] == {"type": "reject", "message": "Not on this machine."}
    assert [
        (r.response_type, r.response_args if r.response_type == "ignore" else None)
        for r in HumanInterrupt.objects.filter(thread_id=thread_id).order_by("position")
    ] == [("edit", None), ("ignore", "Not on this machine.")]
    assert AuditEvent.objects.filter(thread_id=thread_id, kind="interrupt.answered").count() == 2


def test_parallel_interrupts_resume_with_an_id_map(lg, manual_runs, reviewer, transactional_db):
    # Committed: the parallel steps write from the run's threads (SQLite's shared test
    # database would meet the test's open transaction as a locked table).
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "parallel_approval", {"files": ["a.txt", "b.txt"]})
    interrupts = client.get(f"/threads/{thread_id}").json()["interrupts"]
    ids = [i["id"] for items in interrupts.values() for i in items]
    assert len(ids) == 2

    one_only = client.post(
        f"/threads/{thread_id}/runs",
        {"assistant_id": "parallel_approval", "command": {"resume": {"type": "accept"}}},
    )
    assert one_only.status_code == 400
    assert "map {interrupt_id: value}" in one_only.json()["detail"]

    result = resume(
        client,
        manual_runs,
        thread_id,
        "parallel_approval",
        {ids[0]: [{"type": "accept", "args": None}], ids[1]: [{"type": "ignore", "args": None}]},
    )
    assert sorted(a["response"]["type"] for a in result["answers"]) == ["accept", "ignore"]


def test_a_raw_interrupt_takes_a_text(lg, manual_runs, reviewer):
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "raw_question")
    not_text = client.post(
        f"/threads/{thread_id}/runs",
        {"assistant_id": "raw_question", "command": {"resume": {"quarter": 3}}},
    )
    assert not_text.status_code == 400
    assert "HumanResponse" in not_text.json()["detail"]
    assert resume(client, manual_runs, thread_id, "raw_question", "Q3")["answer"] == "Q3"


def test_a_refused_resume_changes_nothing(lg, manual_runs, reviewer):
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "middleware_review")
    # The second decision is not allowed for run_shell (no edit): neither answer is kept.
    refused = client.post(
        f"/threads/{thread_id}/runs",
        {
            "assistant_id": "middleware_review",
            "command": {
                "resume": {
                    "decisions": [
                        {"type": "approve"},
                        {
                            "type": "edit",
                            "edited_action": {"name": "run_shell", "args": {"cmd": "rm -rf /"}},
                        },
                    ]
                }
            },
        },
    )
    assert refused.status_code == 400
    assert "edit" in refused.json()["detail"]
    assert set(
        HumanInterrupt.objects.filter(thread_id=thread_id).values_list("status", flat=True)
    ) == {"pending"}
    assert Run.objects.filter(thread_id=thread_id).count() == 1
    assert not AuditEvent.objects.filter(thread_id=thread_id, kind="interrupt.answered").exists()


def test_wrong_resume_shapes_are_400(lg, manual_runs, reviewer):
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "approval")
    url = f"/threads/{thread_id}/runs"
    cases = [
        {"command": {"resume": {"type": "approve-it"}}},
        {
            "command": {
                "resume": {
                    "type": "edit",
                    "args": {"action": "send_email", "args": {"copies": "two"}},
                }
            }
        },
        {"command": {"resume": [{"type": "accept"}, {"type": "accept"}]}},
        {"command": {"goto": "nowhere", "resume": {"type": "accept"}}},
        {"command": {"goto": {"node": "finish", "args": {}}}},
        {"command": {"update": "x"}},
        {"command": {}},
        {"command": {"resume": {"type": "accept"}}, "input": {"request": "x"}},
    ]
    for body in cases:
        response = client.post(url, {"assistant_id": "approval", **body})
        assert response.status_code == 400, (body, response.content)
        assert response.json()["detail"]
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "pending"
    # A plain new run on a thread that waits for an answer supersedes it (as LangGraph).
    assert client.post(url, {"assistant_id": "approval", "input": {}}).status_code == 200
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "cancelled"


def assert_nothing_recorded(thread_id: str) -> None:
    assert set(
        HumanInterrupt.objects.filter(thread_id=thread_id).values_list("status", flat=True)
    ) == {"pending"}
    assert Run.objects.filter(thread_id=thread_id).count() == 1
    assert not AuditEvent.objects.filter(thread_id=thread_id, kind="interrupt.answered").exists()


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ({}, '"resume"'),
        ({"resume": None}, "resume is empty"),
        ({"resume": {}}, "resume is empty"),
        ({"resume": []}, "resume is empty"),
        ({"resume": [None]}, "is null"),
        ({"resume": 5}, "Cannot answer"),
        (
            {"resume": {"type": "accept", "args": {"unexpected": True}}, "update": "x"},
            "update",
        ),
    ],
)
def test_a_resume_that_answers_nothing_is_refused(lg, manual_runs, reviewer, command, says):
    """`command: {}` or a null resume once ignored every pending interrupt silently."""
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "approval")
    response = client.post(
        f"/threads/{thread_id}/runs", {"assistant_id": "approval", "command": command}
    )
    assert response.status_code == 400, response.content
    assert says in response.json()["detail"]
    assert_nothing_recorded(thread_id)


def test_a_resume_map_with_an_unknown_interrupt_id_records_nothing(lg, manual_runs, reviewer):
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "parallel_approval", {"files": ["a.txt", "b.txt"]})
    ids = list(
        HumanInterrupt.objects.filter(thread_id=thread_id)
        .order_by("position")
        .values_list("interrupt_id", flat=True)
    )
    unknown = uuid.uuid4().hex
    cases = [
        {ids[0]: [{"type": "accept"}], unknown: [{"type": "accept"}]},  # one known, one not
        {unknown: [{"type": "accept"}]},  # an id of nothing on this thread
        {ids[0]: [{"type": "accept"}], ids[1]: None},  # a null answer
        {ids[0]: [{"type": "accept"}], ids[1]: [{"type": "accept"}, {"type": "accept"}]},
    ]
    for resume in cases:
        response = client.post(
            f"/threads/{thread_id}/runs",
            {"assistant_id": "parallel_approval", "command": {"resume": resume}},
        )
        assert response.status_code == 400, (resume, response.content)
        assert response.json()["detail"]
    first = client.post(
        f"/threads/{thread_id}/runs",
        {"assistant_id": "parallel_approval", "command": {"resume": cases[0]}},
    )
    assert unknown in first.json()["detail"]
    assert_nothing_recorded(thread_id)


def test_an_ag_ui_resume_with_a_null_payload_records_nothing(lg, manual_runs, reviewer):
    client = lg(reviewer)
    thread_id = start(client, manual_runs, "approval")
    row = HumanInterrupt.objects.get(thread_id=thread_id)
    body = {
        "threadId": thread_id,
        "runId": "r2",
        "messages": [],
        "state": {},
        "resume": [{"interruptId": str(row.pk), "status": "resolved", "payload": None}],
    }
    response = client.client.post(
        "/agui/approval", json.dumps(body), content_type="application/json", **client.headers
    )
    assert response.status_code == 400, response.content
    assert "null" in response.json()["detail"]
    assert_nothing_recorded(thread_id)


def test_an_answered_interrupt_cannot_be_answered_again(lg, manual_runs, reviewer, second_reviewer):
    thread_id = start(lg(reviewer), manual_runs, "approval")
    interrupt_id = HumanInterrupt.objects.get(thread_id=thread_id).interrupt_id
    first = lg(reviewer).post(
        f"/threads/{thread_id}/runs",
        {"assistant_id": "approval", "command": {"resume": {"type": "accept"}}},
    )
    assert first.status_code == 200
    again = lg(second_reviewer).post(
        f"/threads/{thread_id}/runs",
        {"assistant_id": "approval", "command": {"resume": {interrupt_id: {"type": "ignore"}}}},
    )
    assert again.status_code == 409
    assert again.json()["detail"] == f"Interrupt {interrupt_id} was already answered by rita."


def test_authentication_is_required_and_checked(lg):
    assert lg().post("/threads/search", {}).status_code == 401
    wrong = lg(key="hitl_not-a-token").post("/threads/search", {})
    assert wrong.status_code == 401
    assert "token" in wrong.json()["detail"]
    assert lg().get("/info").status_code == 200  # like LangGraph's server: open


def test_malformed_and_oversized_bodies_are_4xx_json(lg, reviewer, settings):
    client = lg(reviewer)
    malformed = client.post("/threads", raw=b"{not json")
    assert malformed.status_code in (400, 422)
    assert malformed.json()["detail"]
    wrong_type = client.post("/threads/search", {"limit": "many"})
    assert wrong_type.status_code == 422
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = client.post("/threads", {"metadata": {"blob": "x" * 5000}})
    assert big.status_code == 413
    assert big.json() == {"detail": "Request body too large."}
    assert not Thread.objects.exists()


def test_unknown_ids_are_404_or_422_json(lg, reviewer):
    client = lg(reviewer)
    missing = client.get(f"/threads/{uuid.uuid4()}")
    assert missing.status_code == 404
    assert "not found" in missing.json()["detail"]
    assert client.get("/threads/not-a-uuid").status_code == 422
    assert client.get("/assistants/nope").status_code == 404
    unknown_graph = client.post("/runs", {"assistant_id": "nope", "input": {}})
    assert unknown_graph.status_code == 404
    assert "nope" in unknown_graph.json()["detail"]
    assert not Thread.objects.exists()  # the refused stateless run left no thread behind


def test_another_users_thread_is_invisible(lg, manual_runs, requester, outsider, reviewer):
    thread_id = start(lg(requester), manual_runs, "approval")
    other = lg(outsider)
    assert other.get(f"/threads/{thread_id}").status_code == 404
    assert other.get(f"/threads/{thread_id}/state").status_code == 404
    assert other.post("/threads/search", {}).json() == []
    resume_theirs = other.post(
        f"/threads/{thread_id}/runs",
        {"assistant_id": "approval", "command": {"resume": {"type": "accept"}}},
    )
    assert resume_theirs.status_code == 404
    # The reviewer the interrupt is routed to sees it (and the requester, their own).
    assert [
        t["thread_id"]
        for t in lg(reviewer).post("/threads/search", {"status": "interrupted"}).json()
    ] == [thread_id]


def test_thread_search_reads_in_bounded_queries(
    lg, manual_runs, reviewer, django_assert_max_num_queries
):
    client = lg(reviewer)
    for _ in range(3):
        start(client, manual_runs, "approval")
    with django_assert_max_num_queries(6):
        found = client.post("/threads/search", {"limit": 3}).json()
    assert len(found) == 3
    assert all(t["status"] == "interrupted" and t["interrupts"] for t in found)


def test_browser_clients_get_cors_for_allowed_origins_only(lg, reviewer, settings):
    settings.HITL_API_CORS_ORIGINS = ["https://inbox.example.com"]
    client = Client()
    preflight = client.options(
        "/langgraph/threads/search",
        HTTP_ORIGIN="https://inbox.example.com",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-api-key, content-type",
    )
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Origin"] == "https://inbox.example.com"
    assert "x-api-key" in preflight["Access-Control-Allow-Headers"]
    search = client.post(
        "/langgraph/threads/search",
        "{}",
        content_type="application/json",
        HTTP_ORIGIN="https://inbox.example.com",
        HTTP_X_API_KEY=token_for(reviewer),
    )
    assert search.status_code == 200
    assert search["Access-Control-Allow-Origin"] == "https://inbox.example.com"
    assert "content-location" in search["Access-Control-Expose-Headers"]
    other = client.options(
        "/langgraph/threads/search",
        HTTP_ORIGIN="https://evil.example.com",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
    )
    assert "Access-Control-Allow-Origin" not in other
    # The reviewer UI and /api/v1 never answer cross-origin.
    page = client.get("/api/v1/graphs", HTTP_ORIGIN="https://inbox.example.com")
    assert "Access-Control-Allow-Origin" not in page


def test_agent_inbox_mark_as_resolved_withdraws_the_interrupt(lg, manual_runs, requester, outsider):
    client = lg(requester)
    thread_id = start(client, manual_runs, "approval")
    assert (
        lg(outsider)
        .post(f"/threads/{thread_id}/state", {"values": {"x": 1}, "as_node": "propose"})
        .status_code
        == 404
    )
    assert (
        lg(outsider)
        .post(f"/threads/{thread_id}/state", {"values": None, "as_node": "__end__"})
        .status_code
        == 404
    )
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "pending"
    resolved = client.post(f"/threads/{thread_id}/state", {"values": None, "as_node": "__end__"})
    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["checkpoint"]["thread_id"] == thread_id
    assert HumanInterrupt.objects.get(thread_id=thread_id).status == "cancelled"
    assert client.get(f"/threads/{thread_id}").json()["status"] == "idle"
