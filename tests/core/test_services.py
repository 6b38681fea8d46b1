"""Services on real Postgres and the real Postgres checkpointer; runs executed in-process."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from hitl.core import decisions, errors, runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from hitl.core.worker.tasks import execute_run
from tests.graphs import register_in_process

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _test_graphs(monkeypatch):
    register_in_process(monkeypatch)


@pytest.fixture
def start(manual_runs, requester, reviewers_group):
    """Start a thread as the requester and run it until it pauses or ends."""

    def start_(graph: str, input: dict | None = None, user=None) -> Thread:
        run = runs.run_start(graph=graph, input=input or {}, user=user or requester)
        manual_runs(run)
        return Thread.objects.get(pk=run.thread_id)

    return start_


def decide(row, user, response_type, args=None) -> HumanInterrupt:
    return decisions.interrupt_resolve(
        interrupt_id=row.pk, user=user, response_type=response_type, args=args
    ).row


def pending(thread) -> list[HumanInterrupt]:
    return list(thread.interrupts.pending().order_by("interrupt_id", "position"))


def state_of(thread):
    graph = registry.get(thread.graph, checkpointer())
    return graph.get_state({"configurable": {"thread_id": str(thread.pk)}})


def resume(thread, manual_runs) -> Run:
    """Execute the single resume run of the thread's latest answers."""
    run = Run.objects.filter(thread=thread, kind=Run.Kind.RESUME, status="queued").get()
    assert manual_runs(run) in ("success", "interrupted")
    run.refresh_from_db()
    return run


def snapshot(thread) -> dict:
    """Everything a refused decision must leave untouched: rows and the checkpoint."""
    state = state_of(thread)
    return {
        "thread": Thread.objects.filter(pk=thread.pk).values().get(),
        "runs": list(Run.objects.filter(thread=thread).order_by("created_at").values()),
        "interrupts": list(
            HumanInterrupt.objects.filter(thread=thread)
            .order_by("interrupt_id", "position")
            .values()
        ),
        "audit": list(AuditEvent.objects.filter(thread=thread).values_list("pk", flat=True)),
        "checkpoint": state.config["configurable"]["checkpoint_id"],
        "values": state.values,
        "next": state.next,
        "pending": [(i.id, i.value) for i in state.interrupts],
    }


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


# --- refused decisions change nothing ---------------------------------------------------


def assert_refused(thread, row, user, response_type, args, error, message):
    before = snapshot(thread)
    with pytest.raises(error, match=message):
        decide(row, user, response_type, args)
    assert snapshot(thread) == before


@pytest.mark.parametrize(
    ("response_type", "args"), [("response", "no"), ("edit", {"args": {"path": "c"}})]
)
def test_a_type_the_config_forbids_is_refused(start, reviewer, response_type, args):
    thread = start("parallel_approval")
    row = pending(thread)[0]
    assert_refused(
        thread,
        row,
        reviewer,
        response_type,
        args,
        errors.Invalid,
        f"does not allow '{response_type}'",
    )


def test_an_unknown_decision_type_is_refused(start, reviewer):
    thread = start("approval")
    [row] = pending(thread)
    assert_refused(thread, row, reviewer, "approve", None, errors.Invalid, "Unknown decision type")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"args": {"to": "x@example.com", "subject": "s", "copies": 11}}, "copies: 11 is greater"),
        (
            {"args": {"to": "x@example.com", "subject": "s", "copies": "2"}},
            "copies: '2' is not of type",
        ),
        ({"args": {"to": "x@example.com"}}, "'subject' is a required property"),
        ({"args": {"to": "x", "subject": "s", "bcc": "y"}}, "Additional properties"),
        ('{"args": {"to": "x@example.com",', "Edit is not valid JSON"),
        ({"action": "delete_everything", "args": {}}, "cannot change the action"),
        ("[]", "must be an object"),
    ],
)
def test_edit_args_that_break_the_schema_are_refused(start, reviewer, args, message):
    thread = start("approval")
    [row] = pending(thread)
    assert_refused(thread, row, reviewer, "edit", args, errors.Invalid, message)


def test_a_per_call_edit_is_checked_against_the_tools_schema(start, reviewer):
    thread = start("agent_per_call", {"messages": [{"role": "user", "content": "go"}]})
    send = next(r for r in pending(thread) if r.action == "send_email")
    assert send.args_schema["required"] == ["to", "copies"]
    assert_refused(
        thread,
        send,
        reviewer,
        "edit",
        {"args": {"to": "al"}},
        errors.Invalid,
        "'copies' is a required property",
    )


def test_an_answer_the_graphs_response_schema_refuses_is_rolled_back(start, manual_runs, reviewer):
    thread = start("strict_answer")
    [row] = pending(thread)
    assert row.response_schema["properties"]["args"]["anyOf"][1]["maxLength"] == 5
    # The config allows it; only the graph's own schema refuses it, after the row was saved.
    assert_refused(
        thread,
        row,
        reviewer,
        "response",
        "the third quarter",
        errors.Invalid,
        r"does not accept this answer \(args\)",
    )
    decide(row, reviewer, "response", "Q3")
    assert resume(thread, manual_runs).result == {"answer": {"type": "response", "args": "Q3"}}


@pytest.mark.parametrize("interrupt_id", [uuid.uuid4, lambda: "not-a-uuid", lambda: ""])
def test_an_unknown_interrupt_is_not_found(start, reviewer, interrupt_id):
    thread = start("approval")
    before = snapshot(thread)
    with pytest.raises(errors.NotFound, match="No such interrupt"):
        decisions.interrupt_resolve(
            interrupt_id=interrupt_id(), user=reviewer, response_type="accept"
        )
    assert snapshot(thread) == before


def test_an_already_answered_interrupt_names_who_answered(start, reviewer, second_reviewer):
    thread = start("approval")
    [row] = pending(thread)
    decide(row, reviewer, "accept")
    assert_refused(
        thread, row, second_reviewer, "ignore", None, errors.Conflict, "Already answered by rita"
    )
    assert_refused(
        thread, row, reviewer, "accept", None, errors.Conflict, "Already answered by rita"
    )
    assert Run.objects.filter(thread=thread, kind="resume").count() == 1


def test_an_outsider_does_not_learn_the_interrupt_exists(start, outsider, finance_reviewer):
    thread = start("approval")
    [row] = pending(thread)
    assert_refused(thread, row, outsider, "accept", None, errors.NotFound, "No such interrupt")
    assert_refused(
        thread, row, finance_reviewer, "accept", None, errors.NotFound, "No such interrupt"
    )


def test_a_requester_outside_the_reviewer_group_cannot_answer(start, requester):
    thread = start("approval")
    [row] = pending(thread)
    assert_refused(
        thread, row, requester, "accept", None, errors.Forbidden, "reviewer group you are not in"
    )


def test_a_reviewer_of_another_group_cannot_answer_a_visible_interrupt(
    start, finance_reviewer, reviewers_group
):
    # The finance reviewer started the thread (so sees it) but it is routed to "reviewers".
    thread = start("approval", user=finance_reviewer)
    [row] = pending(thread)
    assert row.reviewer_group == reviewers_group
    assert_refused(thread, row, finance_reviewer, "accept", None, errors.Forbidden, "not in")


# --- cancel ---------------------------------------------------------------------------


def test_thread_cancel_cancels_pending_interrupts(start, requester, reviewer, outsider):
    thread = start("parallel_approval")
    first, second = pending(thread)
    decide(first, reviewer, "accept")

    with pytest.raises(errors.Forbidden):
        runs.thread_cancel(thread=thread, user=outsider)
    runs.thread_cancel(thread=thread, user=requester)

    thread.refresh_from_db()
    assert thread.status == "idle"
    statuses = dict(HumanInterrupt.objects.filter(thread=thread).values_list("pk", "status"))
    assert statuses == {first.pk: "resolved", second.pk: "cancelled"}
    with pytest.raises(errors.Conflict, match="cancelled"):
        decide(second, reviewer, "accept")
    assert not Run.objects.filter(thread=thread, kind="resume").exists()


def test_a_cancelled_thread_can_start_again_and_pauses_anew(
    start, manual_runs, requester, reviewer
):
    thread = start("approval", {"request": "first"})
    [old] = pending(thread)
    runs.thread_cancel(thread=thread, user=requester)

    run = runs.run_start(
        graph="approval", input={"request": "second"}, user=requester, thread=thread
    )
    assert manual_runs(run) == "interrupted"
    thread.refresh_from_db()
    assert thread.status == "interrupted"
    [new] = pending(thread)
    assert new.pk != old.pk
    assert new.args["subject"] == "Re: second"
    decide(new, reviewer, "accept")
    assert resume(thread, manual_runs).result["decision"] == {"type": "accept", "args": None}


def test_a_busy_or_interrupted_thread_refuses_a_new_run(start, requester):
    thread = start("approval")
    with pytest.raises(errors.Conflict, match="interrupted"):
        runs.run_start(graph="approval", input={}, user=requester, thread=thread)


# --- failures -------------------------------------------------------------------------


def test_a_failing_graph_records_the_error_and_frees_the_thread(start, manual_runs, requester):
    thread = start("failing")
    run = thread.runs.get()
    assert (thread.status, run.status) == ("error", "error")
    assert "RuntimeError: the tool exploded" in run.error
    assert (run.lease_owner, run.lease_expires_at) == ("", None)
    assert run.finished_at is not None
    assert not thread.interrupts.exists()

    again = runs.run_start(graph="failing", input={"fail": False}, user=requester, thread=thread)
    assert manual_runs(again) == "success"
    again.refresh_from_db()
    assert again.result["done"] is True
    thread.refresh_from_db()
    assert thread.status == "done"


def test_an_unregistered_graph_fails_the_run_instead_of_hanging(start, manual_runs, monkeypatch):
    thread = start("approval")
    run = runs.run_start(graph="approval", input={}, user=thread.requester)
    # e.g. a worker deployed without the graph the web process knows
    monkeypatch.delitem(registry.targets, "approval")
    assert manual_runs(run) == "error"
    run.refresh_from_db()
    assert "Unknown graph 'approval'" in run.error


# --- redelivery ----------------------------------------------------------------------


def test_a_redelivered_run_records_its_pause_without_rerunning_or_duplicating(start, manual_runs):
    thread = start("approval")
    run = thread.runs.get()
    rows = list(HumanInterrupt.objects.filter(thread=thread).values_list("pk", flat=True))
    checkpoint = snapshot(thread)["checkpoint"]
    # As if the worker died after the graph paused but before its ack: the lease expired.
    Run.objects.filter(pk=run.pk).update(
        status="running",
        lease_owner="dead:1",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert manual_runs(run) == "interrupted"
    assert list(HumanInterrupt.objects.filter(thread=thread).values_list("pk", flat=True)) == rows
    assert snapshot(thread)["checkpoint"] == checkpoint
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("interrupted", 2)


def test_a_run_leased_by_a_live_worker_is_left_alone(start):
    thread = start("approval")
    run = thread.runs.get()
    expires = timezone.now() + timedelta(seconds=30)
    Run.objects.filter(pk=run.pk).update(
        status="running", lease_owner="alive:1", lease_expires_at=expires
    )
    outcome, retry_after = execute_run(str(run.pk), worker="pytest")
    assert outcome == "busy" and 25 < retry_after <= 30
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.attempts) == ("running", "alive:1", 1)


def test_a_run_that_keeps_killing_its_worker_is_given_up(manual_runs, requester, settings):
    settings.HITL_RUN_MAX_ATTEMPTS = 3
    run = runs.run_start(graph="approval", input={}, user=requester)
    # Three attempts claimed the run and died without recording anything.
    Run.objects.filter(pk=run.pk).update(
        status="running",
        attempts=3,
        lease_owner="dead:3",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert manual_runs(run) == "skipped"
    run.refresh_from_db()
    assert (run.status, run.attempts, run.lease_owner) == ("error", 3, "")
    assert "Gave up after 3 attempts" in run.error
    assert Thread.objects.get(pk=run.thread_id).status == "error"
    assert not HumanInterrupt.objects.filter(thread_id=run.thread_id).exists()


def test_a_finished_run_is_skipped(start, manual_runs):
    thread = start("approval")
    run = thread.runs.get()
    assert manual_runs(run) == "skipped"
    assert HumanInterrupt.objects.filter(thread=thread).count() == 1


def test_a_queued_run_is_stamped_dispatched_in_its_own_transaction(requester):
    # The send after commit then costs no write; a failed send clears the stamp
    # (tests/ops/test_processes.py covers that with Redis down).
    before = timezone.now()
    run = runs.run_start(graph="demo", input={}, user=requester)
    stamped = Run.objects.get(pk=run.pk).dispatched_at
    assert stamped is not None and stamped >= before
