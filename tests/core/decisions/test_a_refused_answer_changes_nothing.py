"""A refused answer names the problem and leaves the rows and the checkpoint as they were."""

from __future__ import annotations

import uuid

import pytest

from hitl.core import decisions, errors
from hitl.core.models import Run
from tests.conftest import decide
from tests.core.conftest import pending, resume, snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("in_process_graphs")]


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
