"""Nothing lost silently, no internals in messages: notes, race losers, readable failures."""

from __future__ import annotations

import traceback

import pytest

from hitl.core import decisions, runs
from hitl.core.errors import error_headline
from hitl.core.models import AuditEvent, HumanInterrupt, Run
from hitl.core.worker import lease
from tests.conftest import wait_for
from tests.review.conftest import decide_on_page, human_interrupt
from tests.review.test_thread_page import arg_names

pytestmark = pytest.mark.django_db


def clarification(question: str = "Which quarter?", options=None) -> dict:
    return human_interrupt(
        "ask_clarification",
        {"question": question, "clarification_type": "approach_choice", "options": options or []},
        allow_accept=False,
        allow_edit=False,
    )


@pytest.mark.parametrize("kind", ["accept", "edit", "ignore"])
def test_a_note_is_refused_with_a_decision_that_cannot_carry_it(
    paused, client_for, reviewer, requester, kind
):
    _, (row,) = paused(user=requester, values=[human_interrupt()])
    client = client_for(reviewer)
    response = decide_on_page(client, row, {"type": kind, "response": "Please cc legal."})
    assert response.status_code == 400
    page = response.content.decode()
    assert "This note is sent only with Respond" in page
    assert "Please cc legal.</textarea>" in page  # handed back, not dropped
    row.refresh_from_db()
    assert row.status == "pending"
    assert (
        decide_on_page(
            client, row, {"type": "response", "response": "Please cc legal."}
        ).status_code
        == 302
    )
    row.refresh_from_db()
    assert (row.response_type, row.response_args) == ("response", "Please cc legal.")


def test_an_option_and_different_words_are_refused_not_merged(
    paused, client_for, reviewer, requester
):
    _, (row,) = paused(user=requester, values=[clarification(options=["Q3", "Q4"])])
    response = decide_on_page(client_for(reviewer), row, {"choice": "Q3", "response": "Q2 please"})
    assert response.status_code == 400
    assert "Pick an option or send your own words" in response.content.decode()
    row.refresh_from_db()
    assert row.status == "pending"


def test_the_race_loser_sees_what_won_and_gets_their_edit_back(
    paused, client_for, reviewer, second_reviewer, requester
):
    thread, (row,) = paused(user=requester, values=[human_interrupt(args={"to": "a@b.c"})])
    winner, loser = client_for(reviewer), client_for(second_reviewer)
    to = arg_names(winner, row)["to"]
    assert decide_on_page(winner, row, {"type": "edit", to: "cfo@example.com"}).status_code == 302
    response = decide_on_page(loser, row, {"type": "edit", to: "legal@example.com"})
    assert response.status_code == 409
    page = response.content.decode()
    lost = page[page.index(f'id="lost-{row.pk}"') :]
    assert "Already answered by rita. Your decision was not applied." in lost
    assert "edited and approved it" in lost and "cfo@example.com" in lost
    assert "to: legal@example.com</textarea>" in lost
    row.refresh_from_db()
    assert row.response_args["args"]["to"] == "cfo@example.com"
    assert Run.objects.filter(thread=thread, kind="resume").count() == 1


def test_the_outcome_fragment_names_who_and_what(
    paused, client_for, reviewer, second_reviewer, requester, outsider
):
    _, (row,) = paused(user=requester, values=[human_interrupt()])
    url = f"/interrupts/{row.pk}/outcome/"
    assert client_for(second_reviewer).get(url).status_code == 409
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    html = client_for(second_reviewer).get(url).content.decode()
    assert "<b>rita</b> accepted it as proposed" in html and "a@b.c" in html
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(outsider).get("/interrupts/not-a-uuid/outcome/").status_code == 404


def test_messages_name_the_action_in_words(paused, client_for, reviewer, requester):
    _, (question,) = paused(user=requester, values=[clarification("Which quarter?")])
    client = client_for(reviewer)
    response = decide_on_page(client, question, {"type": "response", "response": "Q3"}, follow=True)
    assert "Answer sent: “Which quarter?”" in response.content.decode()
    assert "ask_clarification" not in response.content.decode().split('id="section-runs"')[0]
    _, (email,) = paused(user=requester, values=[human_interrupt("send_email")])
    response = decide_on_page(client, email, {"type": "accept"}, HTTP_ACCEPT="application/json")
    assert response.json()["message"] == "Approved: send email on “approval”"


def _traceback() -> str:
    try:
        try:
            {}["missing"]
        except KeyError:
            raise ValueError("the recipient is not an email address") from None
    except ValueError as exc:
        return "".join(traceback.format_exception(exc))


def test_error_headline_is_the_exception_type_and_message_without_paths():
    text = _traceback()
    assert "^^^^" in text or "File " in text
    assert error_headline(text) == "ValueError: the recipient is not an email address"
    chained = 'Traceback (most recent call last):\n  File "/srv/app/x.py", line 1\n    boom()\n    ^^^^^^\nKeyError: \'a\'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File "/srv/app/y.py", line 2\nRuntimeError: failed in /usr/lib/python3/site-packages/mod.py'  # noqa: E501
    assert error_headline(chained) == "RuntimeError: failed in mod.py"
    assert error_headline("Gave up after 3 attempts.") == "Gave up after 3 attempts."
    noted = "Traceback (most recent call last):\n  File \"x.py\"\nValueError: bad\nDuring task with name 'work' and id 'abc'"  # noqa: E501
    assert error_headline(noted) == "ValueError: bad"
    assert error_headline("") == "The run failed."


def _failed_run(requester) -> Run:
    run = runs.run_start(graph="approval", input={}, user=requester, title="Failing")
    lease.run_lease_take(run_id=run.pk, worker="w")
    lease.run_fail(run_id=run.pk, worker="w", error=_traceback())
    return run


def test_a_failed_run_shows_type_and_message_and_the_traceback_only_to_staff(
    settings, client_for, reviewer, requester, admin_user
):
    settings.HITL_EXECUTOR = "manual"
    run = _failed_run(requester)
    page = client_for(requester).get(f"/threads/{run.thread_id}/").content.decode()
    assert "ValueError: the recipient is not an email address" in page
    assert "Traceback" not in page and "^^^^" not in page
    staff = client_for(admin_user).get(f"/threads/{run.thread_id}/").content.decode()
    assert "Traceback (most recent call last)" in staff and "(for operators)" in staff
    failed = AuditEvent.objects.get(run_id=run.pk, kind="run.failed")
    assert failed.data["error"] == "ValueError: the recipient is not an email address"


def test_the_api_gives_the_error_without_traceback_or_server_paths(settings, api_for, requester):
    settings.HITL_EXECUTOR = "manual"
    run = _failed_run(requester)
    body = api_for(requester).get(f"/api/v1/threads/{run.thread_id}").json()
    error = body["latest_run"]["error"]
    assert error == "ValueError: the recipient is not an email address"
    assert HumanInterrupt.objects.count() == 0


def test_the_demo_refuses_an_edit_without_a_valid_recipient_at_the_field(
    paused, client_for, reviewer, requester
):
    from agents.graphs.demo import send_email_with_approval
    from agents.tools.approval import approval_policy, approval_request

    call = {
        "id": "c1",
        "name": "send_email",
        "args": {"to": "a@b.co", "subject": "Q3", "body": "x"},
    }
    value = approval_request(
        send_email_with_approval, approval_policy(send_email_with_approval), call
    )
    thread, (row,) = paused(user=requester, values=[value], graph="demo")
    client = client_for(reviewer)
    names = arg_names(client, row)
    for bad, message in [("", "Required: this cannot be empty."), ("nobody", "is not valid here")]:
        response = decide_on_page(
            client, row, {"type": "edit", names["to"]: bad, names["subject"]: "Q3"}
        )
        assert response.status_code == 400
        html = response.content.decode()
        field = html[html.index(f'name="{names["to"]}"') :]
        assert message in field[: field.index("</div>", field.index("field-error"))]
        assert "does not match '^" not in html  # no regular expressions for reviewers
    row.refresh_from_db()
    assert row.status == "pending" and not Run.objects.filter(thread=thread, kind="resume")


@pytest.mark.django_db(transaction=True)
def test_an_approved_tool_that_crashes_shows_as_a_failed_action(
    monkeypatch, worker_factory, client_for, reviewer
):
    from tests.graphs import WORKER_GRAPHS, register_in_process

    register_in_process(monkeypatch)
    worker_factory("w1", HITL_EXTRA_GRAPHS=WORKER_GRAPHS)
    run = runs.run_start(graph="failing_tool", input={"request": "crash"}, user=reviewer)
    row = wait_for(lambda: HumanInterrupt.objects.filter(thread=run.thread).first(), 60)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    wait_for(lambda: run.thread.runs.filter(status="error").exists(), 60, what="the run to fail")
    page = client_for(reviewer).get(f"/threads/{run.thread_id}/").content.decode()
    banner = page[page.index('id="failed-actions"') :]
    assert "RuntimeError: SMTP connection to crash.example.com reset by peer" in banner
    assert "status-action-failed" in page and "Traceback" not in page


def test_every_api_names_a_failure_without_its_stack(settings, api_for, requester):
    from hitl.api.langgraph import serializers
    from hitl.ops.webhooks import EVENT_ERROR, _payload

    settings.HITL_EXECUTOR = "manual"
    run = _failed_run(requester)
    run.refresh_from_db()
    expected = "ValueError: the recipient is not an email address"
    assert serializers._error_line(run.error) == expected
    assert _payload(run, EVENT_ERROR)["error"] == expected
