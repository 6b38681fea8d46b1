"""An answer resumes the graph with exactly what the reviewer gave, in every interrupt
shape: HumanInterrupt, parallel interrupts, middleware requests, raw questions."""

from __future__ import annotations

import pytest

from hitl.core.models import Run
from tests.conftest import decide
from tests.core.conftest import pending, resume, snapshot, state_of

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("in_process_graphs")]


# --- a HumanInterrupt answered four ways ----------------------------------------------


@pytest.mark.parametrize(
    ("response_type", "args", "received"),
    [
        ("accept", None, {"type": "accept", "args": None}),
        ("ignore", None, {"type": "ignore", "args": None}),
        ("response", "Wait for Monday.", {"type": "response", "args": "Wait for Monday."}),
        (
            "edit",
            {"args": {"to": "cfo@example.com", "subject": "Q3", "copies": 3, "urgent": True}},
            {
                "type": "edit",
                "args": {
                    "action": "send_email",
                    "args": {"to": "cfo@example.com", "subject": "Q3", "copies": 3, "urgent": True},
                },
            },
        ),
    ],
)
def test_human_interrupt_resumes_with_exactly_the_answer(
    start, manual_runs, reviewer, response_type, args, received
):
    thread = start("approval", {"request": "q3"})
    assert thread.status == "interrupted"
    [row] = pending(thread)
    assert (row.kind, row.action, row.args["copies"]) == ("human_interrupt", "send_email", 1)
    assert row.reviewer_group.name == "reviewers"

    decide(row, reviewer, response_type, args)

    row.refresh_from_db()
    assert (row.status, row.responded_by, row.response_type) == (
        "resolved",
        reviewer,
        response_type,
    )
    run = resume(thread, manual_runs)
    assert run.status == "success"
    assert run.result["decision"] == received
    assert state_of(thread).values["decision"] == received
    assert run.result["sent"] is (response_type in ("accept", "edit"))
    thread.refresh_from_db()
    assert thread.status == "done"
    if response_type == "edit":
        edited = state_of(thread).values["decision"]["args"]["args"]
        assert type(edited["copies"]) is int and edited["urgent"] is True


# --- several interrupts at once -------------------------------------------------------


def test_parallel_interrupts_resume_once_when_all_are_answered(
    start, manual_runs, reviewer, second_reviewer
):
    thread = start("parallel_approval", {"files": ["a.txt", "b.txt"]})
    rows = pending(thread)
    assert len(rows) == 2
    assert len({r.interrupt_id for r in rows}) == 2
    assert {r.args["path"] for r in rows} == {"a.txt", "b.txt"}
    assert {r.kind for r in rows} == {"human_interrupt_list"}
    first, second = sorted(rows, key=lambda r: r.args["path"])

    before = snapshot(thread)
    decide(first, reviewer, "accept")
    after_one = snapshot(thread)
    assert not Run.objects.filter(thread=thread, kind="resume").exists()
    assert after_one["thread"]["status"] == "interrupted"
    assert after_one["checkpoint"] == before["checkpoint"]
    assert after_one["pending"] == before["pending"]

    decide(second, second_reviewer, "ignore")
    [resume_run] = Run.objects.filter(thread=thread, kind="resume")
    assert set(resume_run.input["resume"]) == {first.interrupt_id, second.interrupt_id}
    assert resume_run.input["resume"][first.interrupt_id] == [{"type": "accept", "args": None}]

    resume(thread, manual_runs)
    thread.refresh_from_db()
    assert thread.status == "done"
    answers = {a["path"]: a["response"]["type"] for a in state_of(thread).values["answers"]}
    assert answers == {"a.txt": "accept", "b.txt": "ignore"}
    assert Run.objects.filter(thread=thread, kind="resume").count() == 1


def test_middleware_request_is_answered_with_decisions(start, manual_runs, reviewer):
    thread = start("middleware_review")
    rows = pending(thread)
    assert [(r.position, r.action, r.kind) for r in rows] == [
        (0, "write_file", "hitl_request"),
        (1, "run_shell", "hitl_request"),
    ]
    decide(rows[1], reviewer, "response", "Not on prod.")
    assert not Run.objects.filter(thread=thread, kind="resume").exists()
    decide(rows[0], reviewer, "edit", {"args": {"path": "notes.md", "text": "bye"}})

    resume(thread, manual_runs)
    values = state_of(thread).values
    assert values["decisions"] == [
        {
            "type": "edit",
            "edited_action": {"name": "write_file", "args": {"path": "notes.md", "text": "bye"}},
        },
        {"type": "respond", "message": "Not on prod."},
    ]
    assert values["executed"] == [
        {"name": "write_file", "args": {"path": "notes.md", "text": "bye"}}
    ]
    thread.refresh_from_db()
    assert thread.status == "done"


def test_real_batched_middleware_agent_runs_the_edited_tool(start, manual_runs, reviewer):
    thread = start("agent_batched", {"messages": [{"role": "user", "content": "tidy up"}]})
    send, delete = pending(thread)
    assert (send.action, delete.action) == ("send_email", "delete_file")
    assert sorted(delete.allowed_types) == ["accept", "ignore", "response"]
    decide(send, reviewer, "edit", {"args": {"to": "al@example.com", "copies": 3}})
    decide(delete, reviewer, "ignore")

    resume(thread, manual_runs)
    thread.refresh_from_db()
    assert thread.status == "done"
    final = state_of(thread).values["messages"][-1].content
    assert "sent to al@example.com x3" in final
    assert "User rejected the tool call for `delete_file`" in final


def test_real_per_call_middleware_agent_gets_one_decision_per_call(start, manual_runs, reviewer):
    thread = start("agent_per_call", {"messages": [{"role": "user", "content": "tidy up"}]})
    rows = {r.action: r for r in pending(thread)}
    assert set(rows) == {"send_email", "delete_file"}
    assert {r.kind for r in rows.values()} == {"tool_approval"}
    assert sorted(rows["delete_file"].allowed_types) == ["accept", "ignore", "response"]
    decide(rows["send_email"], reviewer, "accept")
    decide(rows["delete_file"], reviewer, "response", "Keep it.")

    resume(thread, manual_runs)
    final = state_of(thread).values["messages"][-1].content
    assert "sent to bob@example.com x1" in final
    assert "User rejected the tool call for `delete_file` with reason: Keep it." in final


@pytest.mark.parametrize(
    ("response_type", "args", "answer"), [("response", "Q3", "Q3"), ("ignore", None, None)]
)
def test_raw_question_gets_the_text_or_none(
    start, manual_runs, reviewer, response_type, args, answer
):
    thread = start("raw_question")
    [row] = pending(thread)
    assert row.kind == "raw"
    assert row.description == "Which quarter should the report cover?"
    assert row.allowed_types == ["response", "ignore"]
    decide(row, reviewer, response_type, args)
    run = resume(thread, manual_runs)
    assert run.result == {"answer": answer}
