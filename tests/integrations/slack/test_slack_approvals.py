"""Deciding from Slack: Block Kit buttons, signed interactivity, the browser's rules.

Slack's side is played for real (tests/integrations/slack/conftest.py): messages go to a local
stand-in for the incoming webhook, presses arrive signed as Slack signs them, and the
message updates reach the stand-in's response_url and chat.update.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from hitl.core import decisions
from hitl.core.audit import audit_for_thread
from hitl.core.decisions import claims
from hitl.core.models import (
    AuditEvent,
    Run,
    SlackMessage,
    SlackRequestSeen,
    SlackUserLink,
)
from tests.integrations.slack.conftest import (
    TEAM,
    button,
    buttons,
    form_body,
    notified,
    post_signed,
    press,
    run_message_updates,
    send,
    sign,
    submit,
)
from tests.review.conftest import human_interrupt

pytestmark = pytest.mark.usefixtures("slack")


def pending(row) -> bool:
    row.refresh_from_db()
    return row.status == "pending"


def answers(row) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(interrupt_id=row.pk, kind__startswith="interrupt.a"))


def rita_approves(capture, slack, message, row) -> None:
    """rita presses Approve on `message` for `row`; the message updates it asks for run."""
    with capture(execute=True):
        post_signed(
            Client(), press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
        )
    run_message_updates()


# --- the message -----------------------------------------------------------------------


def test_a_message_shows_the_action_args_description_and_thread_with_its_allowed_buttons(
    django_capture_on_commit_callbacks, slack, bot, requester, reviewer
):
    (row,), message = notified(
        django_capture_on_commit_callbacks,
        slack,
        requester,
        reviewer,
        human_interrupt(
            "wire_money", {"to": "ACME <Ltd>", "amount": 12}, allow_ignore=False, title="x"
        ),
    )
    text = json.dumps(message["blocks"], ensure_ascii=False)
    assert "wire_money" in text and "ACME &lt;Ltd&gt;" in text and "Send it?" in text
    assert "thread “approval”" in text
    assert {(b["action_id"], b["text"]["text"]) for b in buttons(message)} == {
        ("hitl_accept", "Approve"),
        ("hitl_respond", "Respond…"),
        ("hitl_open", "Edit in HITL"),  # Edit stays a link to the card
    }
    edit = button(message, "hitl_open", row.pk)
    assert edit["url"].startswith("https://hitl.example.com/n/")


def test_without_a_bot_token_there_is_no_respond_button(
    django_capture_on_commit_callbacks, slack, requester, reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    assert [b["action_id"] for b in buttons(message)] == ["hitl_accept", "hitl_ignore", "hitl_open"]


# --- deciding --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action_id", "decision", "words"),
    [
        ("hitl_accept", "accept", "✅ Approved by *rita* via Slack"),
        ("hitl_ignore", "ignore", "⛔ Ignored by *rita* via Slack"),
    ],
)
def test_a_linked_reviewer_decides_from_slack_and_the_message_shows_it(
    django_capture_on_commit_callbacks,
    slack,
    linked,
    requester,
    reviewer,
    action_id,
    decision,
    words,
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    payload = press(slack, message, button(message, action_id, row.pk), "U0RITA")
    with django_capture_on_commit_callbacks(execute=True):
        response, _ = post_signed(Client(), payload)
    assert response.status_code == 200
    assert run_message_updates() == 1
    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == ("resolved", decision, reviewer)
    assert Run.objects.filter(thread=row.thread, kind="resume").count() == 1  # it resumes
    (answered,) = [e for e in audit_for_thread(row.thread) if e.kind == "interrupt.answered"]
    assert answered.actor == "rita" and "via Slack" in answered.summary
    # The message is replaced through the press's response_url: who decided what.
    (update,) = slack.to("/actions/")
    assert update["body"]["replace_original"] is True
    text = json.dumps(update["body"]["blocks"], ensure_ascii=False)
    assert words in text
    assert not [b for b in buttons(update["body"]) if b["action_id"] == "hitl_accept"]
    message_row = SlackMessage.objects.get()
    assert (message_row.channel_id, message_row.ts) == ("C0REVIEW", "1700000000.000100")


def test_respond_opens_a_modal_whose_answer_decides_and_updates_the_message(
    django_capture_on_commit_callbacks, slack, bot, linked, requester, reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    payload = press(slack, message, button(message, "hitl_respond", row.pk), "U0RITA")
    response, _ = post_signed(Client(), payload)
    assert response.status_code == 200 and pending(row)
    (opened,) = slack.to("/api/views.open")
    assert opened["auth"] == "Bearer xoxb-test"
    assert opened["body"]["trigger_id"] == payload["trigger_id"]
    view = opened["body"]["view"]
    assert view["callback_id"] == "hitl_respond"

    # An empty answer is Slack's form error; nothing changes.
    blank = submit(view, "U0RITA", "")
    response, _ = post_signed(Client(), blank)
    assert response.json()["response_action"] == "errors" and pending(row)

    with django_capture_on_commit_callbacks(execute=True):
        response, _ = post_signed(Client(), submit(view, "U0RITA", "Use the EU account"))
    assert response.status_code == 200 and response.content == b""  # closes the modal
    run_message_updates()
    row.refresh_from_db()
    assert (row.response_type, row.response_args, row.responded_by) == (
        "response",
        "Use the EU account",
        reviewer,
    )
    # With a bot token the message is updated in place (chat.update on its channel and ts).
    (update,) = slack.to("/api/chat.update")
    assert (update["body"]["channel"], update["body"]["ts"]) == ("C0REVIEW", "1700000000.000100")
    assert "💬 Answered by *rita* via Slack" in json.dumps(update["body"], ensure_ascii=False)


@pytest.mark.parametrize(
    ("who", "refusal"),
    [
        ("U0OSCAR", "No such interrupt"),  # linked, but not a reviewer of its group
        ("U0SAM", "rita is on it"),  # a reviewer, but rita claimed the item
        ("U0STRANGER", "not linked"),
    ],
)
def test_respond_opens_no_form_with_the_args_for_someone_who_may_not_answer(
    django_capture_on_commit_callbacks,
    slack,
    bot,
    linked,
    requester,
    reviewer,
    outsider,
    who,
    refusal,
):
    SlackUserLink.objects.create(slack_user_id="U0OSCAR", team_id=TEAM, user=outsider)
    (row,), message = notified(
        django_capture_on_commit_callbacks,
        slack,
        requester,
        reviewer,
        human_interrupt("wire_money", {"to": "ACME secret account 991"}),
    )
    claims.interrupt_claim(interrupt_id=row.pk, user=reviewer)
    payload = press(slack, message, button(message, "hitl_respond", row.pk), who)
    response, _ = post_signed(Client(), payload)
    assert response.status_code == 200
    assert slack.to("/api/views.open") == []  # no form, so no args shown
    told = slack.to("/actions/")[-1]["body"]
    assert told["response_type"] == "ephemeral" and refusal in told["text"]
    assert "991" not in json.dumps(told)
    assert pending(row) and not answers(row)


def test_respond_opens_no_form_for_an_item_already_answered(
    django_capture_on_commit_callbacks, slack, bot, linked, requester, reviewer, second_reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        decisions.interrupt_resolve(
            interrupt_id=row.pk, user=second_reviewer, response_type="accept"
        )
    post_signed(Client(), press(slack, message, button(message, "hitl_respond", row.pk), "U0RITA"))
    assert slack.to("/api/views.open") == []
    assert "Already answered by sam" in slack.to("/actions/")[-1]["body"]["text"]


def test_four_eyes_holds_in_slack_and_a_browser_decision_updates_the_slack_message(
    django_capture_on_commit_callbacks, slack, bot, linked, requester, reviewer, second_reviewer
):
    (row,), message = notified(
        django_capture_on_commit_callbacks, slack, requester, reviewer, human_interrupt(approvals=2)
    )
    approve = button(message, "hitl_accept", row.pk)
    with django_capture_on_commit_callbacks(execute=True):
        post_signed(Client(), press(slack, message, approve, "U0RITA"))
    run_message_updates()
    assert pending(row)  # one approval of two
    progress = slack.to("/api/chat.update")[-1]["body"]
    assert "Needs 2 approvals: 1 so far (rita)" in json.dumps(progress, ensure_ascii=False)

    # rita again: the same person cannot be the second pair of eyes.
    post_signed(Client(), press(slack, message, approve, "U0RITA"))
    assert "already approved" in slack.to("/actions/")[-1]["body"]["text"]
    # The requester cannot approve their own thread's action, from Slack either.
    requester.groups.add(reviewer.groups.get())  # a reviewer too, yet it is their thread
    post_signed(Client(), press(slack, message, approve, "U0QUINN"))
    refusal = slack.to("/actions/")[-1]["body"]
    assert refusal["response_type"] == "ephemeral" and "requested this thread" in refusal["text"]
    assert pending(row)

    # sam approves in the browser: the Slack message shows the result too.
    browser = Client()
    browser.force_login(second_reviewer)
    updates_before = len(slack.to("/api/chat.update"))
    with django_capture_on_commit_callbacks(execute=True):
        browser.post(reverse("interrupt-decide", args=[row.pk]), {"type": "accept"})
    run_message_updates()
    row.refresh_from_db()
    assert (row.status, row.responded_by) == ("resolved", second_reviewer)
    final = slack.to("/api/chat.update")[updates_before:][-1]["body"]
    text = json.dumps(final, ensure_ascii=False)
    # Both pairs of eyes are named, as the card and the history name them.
    assert "✅ Approved by *rita* and *sam*" in text and "via Slack" not in text
    assert not [b for b in buttons(final) if b["action_id"] == "hitl_accept"]


def test_under_four_eyes_the_requesters_own_message_offers_no_approve(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer
):
    requester.groups.add(reviewer.groups.get())  # a reviewer too, yet it is their thread
    (row,), message = notified(
        django_capture_on_commit_callbacks,
        slack,
        requester,
        requester,
        human_interrupt(approvals=2),
    )
    # As the browser's card disables it: no Approve, the reason, and no Edit offered.
    assert [b["action_id"] for b in buttons(message)] == ["hitl_ignore", "hitl_open"]
    assert button(message, "hitl_open", row.pk)["text"]["text"] == "Open in HITL"
    text = json.dumps(message["blocks"], ensure_ascii=False)
    assert "No Approve for you: You requested this thread" in text


def test_after_approving_in_slack_the_approvers_message_offers_approve_no_more(
    django_capture_on_commit_callbacks, slack, bot, linked, requester, reviewer
):
    (row,), message = notified(
        django_capture_on_commit_callbacks, slack, requester, reviewer, human_interrupt(approvals=2)
    )
    rita_approves(django_capture_on_commit_callbacks, slack, message, row)
    assert pending(row)
    progress = slack.to("/api/chat.update")[-1]["body"]
    assert "hitl_accept" not in [b["action_id"] for b in buttons(progress)]
    assert "You have approved these args already" in json.dumps(progress, ensure_ascii=False)


def test_an_item_someone_else_claimed_is_refused_from_slack_naming_them(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer, second_reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    claims.interrupt_claim(interrupt_id=row.pk, user=second_reviewer)
    post_signed(Client(), press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA"))
    assert pending(row) and not answers(row)
    refusal = slack.to("/actions/")[-1]["body"]
    assert refusal["response_type"] == "ephemeral" and "sam is on it" in refusal["text"]
    assert "override_claim" not in refusal["text"]  # the API's words, not a Slack user's


def test_a_decision_from_slack_can_be_undone_from_slack_within_the_grace_period(
    django_capture_on_commit_callbacks, slack, settings, linked, requester, reviewer
):
    settings.HITL_UNDO_SECONDS = 30
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    rita_approves(django_capture_on_commit_callbacks, slack, message, row)
    row.refresh_from_db()
    assert row.status == "resolved" and row.undo_until is not None
    assert not Run.objects.filter(thread=row.thread, kind="resume").exists()  # not yet
    decided = slack.to("/actions/")[-1]["body"]
    undo = button(decided, "hitl_undo", row.pk)
    with django_capture_on_commit_callbacks(execute=True):
        post_signed(Client(), press(slack, decided, undo, "U0RITA"))
    run_message_updates()
    assert pending(row)
    assert AuditEvent.objects.filter(interrupt_id=row.pk, kind="interrupt.undone").exists()
    again = slack.to("/actions/")[-1]["body"]
    assert [b["action_id"] for b in buttons(again)][:2] == ["hitl_accept", "hitl_ignore"]


def test_the_message_drops_undo_when_the_grace_period_ends_and_the_agent_resumes(
    django_capture_on_commit_callbacks, slack, settings, linked, requester, reviewer
):
    settings.HITL_UNDO_SECONDS = 30
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    rita_approves(django_capture_on_commit_callbacks, slack, message, row)
    decided = slack.to("/actions/")[-1]["body"]
    assert "(may still be undone)" in json.dumps(decided["blocks"], ensure_ascii=False)
    assert button(decided, "hitl_undo", row.pk)
    seen = len(slack.to("/actions/"))
    row.refresh_from_db()
    # The grace period ends: the agent resumes, and the message says so, with no Undo.
    with django_capture_on_commit_callbacks(execute=True):
        decisions.interrupt_release(interrupt_id=row.pk, now=row.undo_until + timedelta(seconds=1))
    assert Run.objects.filter(thread=row.thread, kind="resume").count() == 1
    assert run_message_updates() == 1
    assert len(slack.to("/actions/")) == seen + 1
    final = slack.to("/actions/")[-1]["body"]
    text = json.dumps(final["blocks"], ensure_ascii=False)
    assert "✅ Approved by *rita* via Slack" in text
    assert "may still be undone" not in text
    assert [b["action_id"] for b in buttons(final)] == []


def test_a_digest_message_is_updated_when_its_other_item_is_decided_in_the_browser(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer, second_reviewer
):
    (first, second), message = notified(
        django_capture_on_commit_callbacks,
        slack,
        requester,
        reviewer,
        human_interrupt("send_email"),
        human_interrupt("delete_file", {"path": "q3.csv"}),
    )
    with django_capture_on_commit_callbacks(execute=True):
        post_signed(
            Client(), press(slack, message, button(message, "hitl_accept", first.pk), "U0RITA")
        )
    run_message_updates()
    browser = Client()
    browser.force_login(second_reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        browser.post(reverse("interrupt-decide", args=[second.pk]), {"type": "ignore"})
    run_message_updates()
    # No bot token: the stored response_url (fresh for 30 minutes) carries the update.
    latest = json.dumps(slack.to("/actions/")[-1]["body"], ensure_ascii=False)
    assert "✅ Approved by *rita* via Slack" in latest and "⛔ Ignored by *sam*" in latest


def test_the_slack_user_maps_by_email_only_when_the_operator_allows_it(
    django_capture_on_commit_callbacks, slack, settings, requester, reviewer
):
    reviewer.email = "rita@example.com"
    reviewer.save()
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    approve = button(message, "hitl_accept", row.pk)
    post_signed(Client(), press(slack, message, approve, "U0NEW", email="RITA@example.com"))
    assert pending(row)
    assert "not linked" in slack.to("/actions/")[-1]["body"]["text"]

    settings.HITL_SLACK_MATCH_EMAIL = True
    with django_capture_on_commit_callbacks(execute=True):
        post_signed(Client(), press(slack, message, approve, "U0NEW", email="RITA@example.com"))
    row.refresh_from_db()
    assert (row.status, row.responded_by) == ("resolved", reviewer)


# --- refused requests change nothing ---------------------------------------------------


def _unchanged(row, slack, seen_before: int) -> None:
    assert pending(row) and not answers(row)
    assert slack.to("/actions/") == [] and slack.to("/api/") == []
    assert SlackMessage.objects.get().ts == ""  # not even where the message lives
    assert SlackRequestSeen.objects.count() == seen_before


def test_a_forged_signature_is_refused(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    response, _ = post_signed(Client(), payload, secret="not-the-signing-secret")
    assert response.status_code == 401
    _unchanged(row, slack, 0)


def test_a_body_altered_after_signing_is_refused(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    honest = press(slack, message, button(message, "hitl_open", row.pk), "U0SAM")
    timestamp = str(int(time.time()))
    headers = {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": sign(form_body(honest), timestamp),
    }
    forged = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    assert send(Client(), form_body(forged), headers).status_code == 401
    _unchanged(row, slack, 0)


def test_a_stale_request_is_refused(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    response, _ = post_signed(Client(), payload, at=time.time() - 6 * 60)  # signed correctly
    assert response.status_code == 401
    _unchanged(row, slack, 0)


def test_a_replayed_request_is_refused(
    django_capture_on_commit_callbacks, slack, settings, linked, requester, reviewer
):
    settings.HITL_UNDO_SECONDS = 30
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    with django_capture_on_commit_callbacks(execute=True):
        first, headers = post_signed(Client(), payload)
    assert first.status_code == 200 and not pending(row)
    # rita takes it back in the browser: the same approval would now count again ...
    decisions.interrupt_undo(interrupt_id=row.pk, user=reviewer)
    assert pending(row)
    answered = len(answers(row))
    # ... but the very same request, sent again within the five minutes, is refused.
    replay = send(Client(), form_body(payload), headers)
    assert replay.status_code == 401 and "replay" in replay.json()["error"]
    assert pending(row) and len(answers(row)) == answered
    assert SlackRequestSeen.objects.count() == 1


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),  # not Slack's
        ({"HTTP_X_SLACK_REQUEST_TIMESTAMP": "1700000000"}, 401),
        # Headers Slack never sends that way cannot be read: a 400 naming the header.
        ({"HTTP_X_SLACK_REQUEST_TIMESTAMP": "yesterday", "HTTP_X_SLACK_SIGNATURE": "v0=00"}, 400),
        (
            {"HTTP_X_SLACK_REQUEST_TIMESTAMP": "1700000000", "HTTP_X_SLACK_SIGNATURE": "sha1=00"},
            400,
        ),
    ],
)
def test_requests_without_a_readable_signature_are_refused(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer, headers, status
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    assert send(Client(), form_body(payload), headers).status_code == status
    _unchanged(row, slack, 0)


def test_an_unreadable_signed_body_is_a_clear_400(slack, db):
    timestamp = str(int(time.time()))
    body = "payload=%7Bnot+json"
    headers = {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": sign(body, timestamp),
    }
    response = send(Client(), body, headers)
    assert response.status_code == 400 and "payload" in response.json()["error"]


def test_an_unlinked_slack_user_is_told_and_nothing_changes(
    django_capture_on_commit_callbacks, slack, requester, reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    post_signed(
        Client(), press(slack, message, button(message, "hitl_accept", row.pk), "U0STRANGER")
    )
    assert pending(row) and not answers(row)
    (told,) = slack.to("/actions/")
    assert told["body"]["response_type"] == "ephemeral" and "not linked" in told["body"]["text"]


def test_the_endpoint_is_off_without_a_signing_secret(settings, db):
    settings.HITL_SLACK_SIGNING_SECRET = ""
    assert (
        Client()
        .post(
            "/slack/interactivity/",
            data="payload=%7B%7D",
            content_type="application/x-www-form-urlencoded",
        )
        .status_code
        == 404
    )


def test_an_old_response_url_is_not_used(
    django_capture_on_commit_callbacks, slack, linked, requester, reviewer, second_reviewer
):
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    SlackMessage.objects.update(
        response_url=slack.response_url, response_url_at=timezone.now() - timedelta(minutes=31)
    )
    with django_capture_on_commit_callbacks(execute=True):
        decisions.interrupt_resolve(
            interrupt_id=row.pk, user=second_reviewer, response_type="accept"
        )
    assert slack.to("/actions/") == []  # Slack refuses those after 30 minutes anyway


def test_an_admin_links_a_slack_account_to_a_user(admin_user, reviewer):
    browser = Client()
    browser.force_login(admin_user)
    assert browser.get("/admin/hitl/slackuserlink/add/").status_code == 200
    response = browser.post(
        "/admin/hitl/slackuserlink/add/",
        {"slack_user_id": "U0RITA", "team_id": TEAM, "user": reviewer.pk},
    )
    assert response.status_code == 302
    assert SlackUserLink.objects.get().user == reviewer
    # The same Slack account cannot act as two people.
    twice = browser.post(
        "/admin/hitl/slackuserlink/add/",
        {"slack_user_id": "U0RITA", "team_id": TEAM, "user": admin_user.pk},
    )
    assert twice.status_code == 200 and SlackUserLink.objects.count() == 1
