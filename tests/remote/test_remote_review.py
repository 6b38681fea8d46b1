"""Interrupts of a real LangGraph deployment reviewed in HITL, decided and resumed there."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hitl.core.decisions import interrupt_resolve
from hitl.core.decisions.claims import interrupt_claim
from hitl.core.errors import Conflict
from hitl.core.models import (
    AuditEvent,
    DecisionRule,
    GroupNotificationSettings,
    HumanInterrupt,
    Notification,
    RemoteDeployment,
    RemoteThread,
    ReviewerGroupPolicy,
    Run,
    Thread,
)
from hitl.core.remote.mirror import deployment_poll
from hitl.ops.notifications import notification_attempt
from tests.conftest import decide
from tests.ops.notify_helpers import notify_fixture, smtp_fixture, text_of  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deployment(peer, reviewers_group, manual_runs):
    return RemoteDeployment.objects.create(
        name="prod",
        base_url=peer.base_url,
        api_key="key-not-for-pages",
        reviewer_group=reviewers_group,
    )


def mirrored(deployment, remote_thread_id: str) -> list[HumanInterrupt]:
    """Poll, then the rows of one remote thread, in order."""
    found = deployment_poll(deployment)
    assert found["failed"] == 0, deployment.last_error
    link = RemoteThread.objects.get(deployment=deployment, remote_thread_id=remote_thread_id)
    return list(HumanInterrupt.objects.filter(thread_id=link.thread_id).in_order())


def remote_values(peer, remote_thread_id: str) -> dict:
    """The remote thread's status and state values once its runs have ended."""
    client = peer.client()
    for run in client.runs.list(remote_thread_id):
        if run["status"] in ("pending", "running"):
            client.runs.join(remote_thread_id, run["run_id"])
    thread = client.threads.get(remote_thread_id)
    values = client.threads.get_state(remote_thread_id)["values"]
    return {"status": thread["status"], "values": values}


def test_interrupts_become_rows_once_with_the_local_contract(peer, deployment, reviewers_group):
    review = peer.interrupted_thread("review", request="the launch")
    tools = peer.interrupted_thread("middleware")
    raw = peer.interrupted_thread("raw")

    [mail] = mirrored(deployment, review)
    assert mail.kind == HumanInterrupt.Kind.HUMAN_INTERRUPT_LIST
    assert (mail.action, mail.args) == ("send_email", {"to": "team@example.com", "copies": 1})
    assert mail.description == "Send the email about the launch?"
    assert mail.reviewer_group == reviewers_group
    assert mail.status == HumanInterrupt.Status.PENDING
    assert mail.thread.status == Thread.Status.INTERRUPTED
    assert mail.thread.graph == "remote:prod/review"
    write, shell = mirrored(deployment, tools)
    assert write.kind == shell.kind == HumanInterrupt.Kind.HITL_REQUEST
    assert (write.action, write.allow_edit, shell.action, shell.allow_edit) == (
        "write_file",
        True,
        "run_shell",
        False,
    )
    [question] = mirrored(deployment, raw)
    assert question.kind == HumanInterrupt.Kind.RAW
    assert question.raw_value == "Which quarter should the report cover?"
    assert AuditEvent.objects.filter(kind="interrupt.created", interrupt=mail).count() == 1

    # Polled again: nothing new.
    before = HumanInterrupt.objects.count()
    assert deployment_poll(deployment)["made"] == 0
    assert HumanInterrupt.objects.count() == before


@pytest.mark.parametrize(
    ("response_type", "args", "sent"),
    [
        ("accept", None, {"to": "team@example.com", "copies": 1}),
        (
            "edit",
            {"action": "send_email", "args": {"to": "boss@example.com", "copies": 2}},
            {"to": "boss@example.com", "copies": 2},
        ),
        ("response", "Not today.", {}),
        ("ignore", None, {}),
    ],
)
def test_each_decision_resumes_the_remote_thread(
    peer, deployment, reviewer, manual_runs, response_type, args, sent
):
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)

    run = decide(row, reviewer, response_type, args).resume_run
    assert run is not None and run.kind == Run.Kind.RESUME
    assert manual_runs(run) == "delivered"
    answered = AuditEvent.objects.get(kind="interrupt.answered", interrupt=row)
    assert answered.actor == reviewer and answered.data["response_type"] == response_type

    remote = remote_values(peer, remote_id)
    assert remote["status"] == "idle"
    assert remote["values"]["sent"] == sent
    assert remote["values"]["decision"]["type"] == response_type
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCESS and run.result["remote_run_id"]
    # The next poll sees the remote thread done.
    deployment_poll(deployment)
    assert Thread.objects.get(pk=row.thread_id).status == Thread.Status.DONE


def test_middleware_and_raw_interrupts_are_answered_in_their_own_shape(
    peer, deployment, reviewer, manual_runs
):
    tools = peer.interrupted_thread("middleware")
    raw = peer.interrupted_thread("raw")
    write, shell = mirrored(deployment, tools)
    [question] = mirrored(deployment, raw)

    assert (
        decide(
            write, reviewer, "edit", {"action": "write_file", "args": {"path": "x.md"}}
        ).resume_run
        is None
    )
    run = decide(shell, reviewer, "ignore").resume_run
    assert manual_runs(run) == "delivered"
    assert manual_runs(decide(question, reviewer, "response", "Q3").resume_run) == "delivered"

    decisions = remote_values(peer, tools)["values"]["decisions"]
    assert [d["type"] for d in decisions] == ["edit", "reject"]
    assert decisions[0]["edited_action"] == {"name": "write_file", "args": {"path": "x.md"}}
    assert remote_values(peer, raw)["values"]["answer"] == "Q3"


def test_four_eyes_waits_for_a_second_reviewer_before_resuming(
    peer, deployment, reviewers_group, reviewer, second_reviewer, manual_runs
):
    ReviewerGroupPolicy.objects.create(group=reviewers_group, approvals_required=2)
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)
    assert row.approvals_required == 2

    assert decide(row, reviewer, "accept").resume_run is None
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.PENDING
    assert peer.client().threads.get(remote_id)["status"] == "interrupted"

    run = decide(row, second_reviewer, "accept").resume_run
    assert manual_runs(run) == "delivered"
    assert remote_values(peer, remote_id)["values"]["sent"]["to"] == "team@example.com"


def test_a_live_rule_decides_a_remote_interrupt(peer, deployment, manual_runs):
    DecisionRule.objects.create(
        name="team-mail",
        outcome="accept",
        action="send_email",
        condition='args.to.endsWith("@example.com")',
        mode="live",
    )
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)
    assert row.status == HumanInterrupt.Status.RESOLVED
    assert row.decided_by_rule == "team-mail v1"

    run = Run.objects.get(thread_id=row.thread_id, kind=Run.Kind.RESUME, status=Run.Status.QUEUED)
    assert manual_runs(run) == "delivered"
    assert remote_values(peer, remote_id)["values"]["decision"] == {"type": "accept", "args": None}


def test_an_interrupt_answered_elsewhere_closes_its_row(peer, deployment, reviewer):
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)

    # Someone answers in Agent Inbox (straight through the deployment's API).
    client = peer.client()
    made = client.runs.create(
        remote_id, "review", command={"resume": {row.interrupt_id: [{"type": "ignore"}]}}
    )
    client.runs.join(remote_id, made["run_id"])

    deployment_poll(deployment)
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.CANCELLED
    event = AuditEvent.objects.get(kind="interrupt.cancelled", interrupt=row)
    assert event.data == {"reason": "answered elsewhere", "deployment": "prod"}
    assert Thread.objects.get(pk=row.thread_id).status == Thread.Status.DONE
    with pytest.raises(Conflict, match="cancelled"):
        decide(row, reviewer, "accept")


def test_a_decision_that_lost_the_race_is_refused_and_recorded(
    peer, deployment, reviewer, manual_runs, client
):
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)
    run = decide(row, reviewer, "accept").resume_run  # queued, not delivered yet

    remote = peer.client()
    made = remote.runs.create(
        remote_id, "review", command={"resume": {row.interrupt_id: [{"type": "ignore"}]}}
    )
    remote.runs.join(remote_id, made["run_id"])

    assert manual_runs(run) == "refused"
    run.refresh_from_db()
    assert run.status == Run.Status.ERROR
    assert "refused by prod: 409" in run.error and "resumed elsewhere" in run.error
    assert AuditEvent.objects.filter(kind="run.failed", run_id=run.pk).exists()
    # The remote thread kept the other answer.
    assert remote_values(peer, remote_id)["values"]["decision"]["type"] == "ignore"
    thread = Thread.objects.get(pk=row.thread_id)
    assert thread.status == Thread.Status.ERROR
    deployment_poll(deployment)  # the poll does not hide the refusal
    thread.refresh_from_db()
    assert thread.status == Thread.Status.ERROR
    # The reviewer sees it on the thread.
    client.force_login(reviewer)
    page = client.get(f"/threads/{thread.pk}/").content.decode()
    assert "refused by prod: 409" in page
    assert "Start a new run" not in page


def test_a_deployment_down_mid_decision_delivers_once_it_is_back(
    peer, deployment, reviewer, manual_runs, client
):
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)
    peer.stop()
    try:
        run = decide(row, reviewer, "accept").resume_run
        assert manual_runs(run) == "retry"
        run.refresh_from_db()
        assert run.status == Run.Status.QUEUED
        assert run.error.startswith("pending delivery to prod: unreachable")
        deployment.refresh_from_db()
        assert deployment.last_error.startswith("unreachable")
        assert client.get("/healthz").json()["remote"]["prod"] == "down"
        assert deployment_poll(deployment)["failed"] == 1
        row.refresh_from_db()
        assert row.status == HumanInterrupt.Status.RESOLVED  # the decision is kept
        client.force_login(reviewer)
        page = client.get(f"/threads/{row.thread_id}/")
        assert page.status_code == 200
        assert b"Decision pending delivery." in page.content
    finally:
        peer.start(fresh=False)

    assert manual_runs(run) == "delivered"
    assert remote_values(peer, remote_id)["values"]["decision"] == {"type": "accept", "args": None}
    deployment_poll(deployment)
    deployment.refresh_from_db()
    assert deployment.last_error == ""
    assert client.get("/healthz").json()["remote"]["prod"] == "up"


def test_the_thread_page_shows_the_remote_state_and_history(
    peer, deployment, reviewer, manual_runs, client
):
    remote_id = peer.interrupted_thread("review", request="the quarterly report")
    [row] = mirrored(deployment, remote_id)
    client.force_login(reviewer)
    inbox = client.get("/").content.decode()
    assert row.thread.title in inbox and "send_email" in inbox  # in the reviewer's inbox
    manual_runs(decide(row, reviewer, "accept").resume_run)
    remote_values(peer, remote_id)

    page = client.get(f"/threads/{row.thread_id}/").content.decode()
    assert "Runs on prod" in page and remote_id in page
    assert "the quarterly report" in page  # the remote state's values
    assert "key-not-for-pages" not in page
    history = client.get(f"/threads/{row.thread_id}/history/", {"partial": "1"}).content.decode()
    assert history.count('<li class="checkpoint') >= 3  # its history: input, review, act
    assert "(read from its deployment)" in history and "btn-fork" not in history
    assert "key-not-for-pages" not in history


def test_an_undone_decision_never_reaches_the_deployment(peer, deployment, reviewer, manual_runs):
    from hitl.core.decisions import interrupt_undo

    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)
    answer = interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="ignore", grace=60)
    assert answer.resume_run is None  # held for the grace period
    interrupt_undo(interrupt_id=row.pk, user=reviewer)
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.PENDING
    assert not Run.objects.filter(thread_id=row.thread_id, kind=Run.Kind.RESUME).exists()
    assert peer.client().threads.get(remote_id)["status"] == "interrupted"

    run = decide(row, reviewer, "accept").resume_run
    assert manual_runs(run) == "delivered"
    assert remote_values(peer, remote_id)["values"]["decision"]["type"] == "accept"


def test_a_delivery_whose_worker_died_after_sending_is_not_taken_for_a_conflict(
    peer, deployment, reviewer, manual_runs
):
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)
    run = decide(row, reviewer, "accept").resume_run
    # What an attempt that died right after sending leaves: the remote run, tagged with
    # the local run's id, and the local run still to be recorded.
    client = peer.client()
    sent = client.runs.create(
        remote_id,
        "review",
        command=run.input,
        metadata={"hitl_run_id": str(run.pk)},
        config={"configurable": {"hitl_run_id": str(run.pk)}},
    )
    client.runs.join(remote_id, sent["run_id"])

    assert manual_runs(run) == "delivered"
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCESS
    assert run.result == {"remote_run_id": sent["run_id"]}
    assert len(client.runs.list(remote_id)) == 2  # the first run and the one resume


def test_a_thread_deleted_on_the_deployment_withdraws_its_items(peer, deployment):
    remote_id = peer.interrupted_thread("review")
    [row] = mirrored(deployment, remote_id)

    peer.client().threads.delete(remote_id)
    deployment_poll(deployment)
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.CANCELLED
    event = AuditEvent.objects.get(kind="interrupt.cancelled", interrupt=row)
    assert event.data["reason"] == "remote thread deleted"
    assert Thread.objects.get(pk=row.thread_id).status == Thread.Status.IDLE


def test_a_remote_item_is_mailed_and_claimed_as_a_local_one_is(
    peer, deployment, reviewer, second_reviewer, manual_runs, smtp, notify
):
    """The remote pause reaches a real SMTP server as a local one does, and a reviewer's
    "I'm on it" holds back a second reviewer's client until the claim is overridden."""
    reviewer.email = "rita@example.com"
    reviewer.save()
    # What earlier tests left paused on this server is mirrored before anyone is mailed.
    assert deployment_poll(deployment)["failed"] == 0
    GroupNotificationSettings.objects.create(group=deployment.reviewer_group, email_members=True)
    remote_id = peer.interrupted_thread("review", request="the launch")
    [row] = mirrored(deployment, remote_id)

    for pk in Notification.objects.values_list("pk", flat=True):
        notification_attempt(notification_id=pk, now=timezone.now() + timedelta(hours=1))
    (sent,) = Notification.objects.all()
    assert (sent.status, sent.address, sent.interrupt_ids) == (
        "sent",
        "rita@example.com",
        [str(row.pk)],
    )
    (message,) = smtp.messages()
    assert "send_email" in message["Subject"]
    assert "team@example.com" in text_of(message)  # the key args, as for a local item

    interrupt_claim(interrupt_id=row.pk, user=reviewer)
    with pytest.raises(Conflict, match=f"{reviewer.username} is on it"):
        interrupt_resolve(
            interrupt_id=row.pk, user=second_reviewer, response_type="accept", respect_claim=True
        )
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.PENDING
    assert remote_values(peer, remote_id)["status"] == "interrupted"  # nothing was sent

    run = decide(row, reviewer, "accept").resume_run
    assert manual_runs(run) == "delivered"
    assert remote_values(peer, remote_id)["values"]["sent"] == {
        "to": "team@example.com",
        "copies": 1,
    }
