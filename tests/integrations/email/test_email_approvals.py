"""Deciding from e-mail: one-click links that confirm first, used once, bound to their recipient.

Messages go through a real SMTP server (aiosmtpd, started by the test); links are taken
from the delivered message and opened like a browser (or a mail scanner) would.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from hitl.core.audit import audit_for_thread
from hitl.core.decisions import claims, email_links
from hitl.core.models import (
    AuditEvent,
    EmailActionLink,
    GroupNotificationSettings,
    Notification,
    Run,
)
from hitl.ops.notifications import notification_attempt
from tests.integrations.email.conftest import PUBLIC, answered, mailed, pending
from tests.ops.notify_helpers import html_of, text_of, with_email
from tests.review.conftest import human_interrupt, open_interrupts

LINK = re.compile(r"https://hitl\.example\.com/[^\s\"<>]+")


def test_an_email_names_thread_and_action_and_links_each_allowed_decision(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), _ = mailed(
        django_capture_on_commit_callbacks,
        smtp,
        requester,
        [reviewer],
        human_interrupt("wire_money", allow_ignore=False),
    )
    (message,) = smtp.messages()
    assert message["Subject"] == '[HITL] Waiting for review: wire_money on "approval"'
    text, html = text_of(message), html_of(message)
    labels = re.findall(r"^\s+(Approve|Ignore|Respond): ", text, re.M)
    assert labels == ["Approve", "Respond"]  # no Ignore: the config does not allow it
    assert ">Approve</a>" in html and ">Respond</a>" in html and ">Ignore</a>" not in html
    assert "Edit or open in HITL" in html  # edit stays a link to the card
    links = EmailActionLink.objects.filter(interrupt=row, user=reviewer)
    assert sorted(links.values_list("response_type", flat=True)) == ["accept", "response"]


def test_a_team_address_gets_no_one_click_links(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    group = Group.objects.get(name=reviewer.groups.get().name)
    GroupNotificationSettings.objects.create(group=group, email_addresses="team@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        open_interrupts(user=requester, values=[human_interrupt()])
    (note,) = Notification.objects.filter(status="collecting")
    notification_attempt(notification_id=note.pk, now=note.send_after)
    (message,) = smtp.messages()
    assert message["To"] == "team@example.com"
    assert "/e/" not in text_of(message)  # nobody in particular would decide
    assert not EmailActionLink.objects.exists()


def test_a_mail_scanner_fetching_every_link_decides_nothing(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), _ = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    (message,) = smtp.messages()
    urls = set(LINK.findall(text_of(message))) | set(LINK.findall(html_of(message)))
    assert len([u for u in urls if "/e/" in u]) == 3
    scanner = Client()
    for url in urls:
        response = scanner.get(url[len(PUBLIC) :].replace("&amp;", "&"))
        assert response.status_code in (200, 302)
    assert pending(row) and answered(row) == 0
    assert not EmailActionLink.objects.filter(used_at__isnull=False).exists()


@pytest.mark.parametrize(
    ("label", "answer", "decision", "args"),
    [
        ("Approve", "", "accept", None),
        ("Ignore", "", "ignore", None),
        ("Respond", "Use the EU account", "response", "Use the EU account"),
    ],
)
def test_confirming_a_link_decides_once_as_its_recipient(
    django_capture_on_commit_callbacks, smtp, requester, reviewer, label, answer, decision, args
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    path = links["rita"][label]
    browser = Client()  # not logged in: the link is enough (HITL_EMAIL_LINK_REQUIRE_LOGIN off)
    page = browser.get(path)
    assert page.status_code == 200 and f"Confirm: {label}" in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        done = browser.post(path, {"answer": answer})
    assert done.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.response_type, row.response_args, row.responded_by) == (
        "resolved",
        decision,
        args,
        reviewer,
    )
    assert Run.objects.filter(thread=row.thread, kind="resume").count() == 1
    (entry,) = [e for e in audit_for_thread(row.thread) if e.kind == "interrupt.answered"]
    assert entry.actor == "rita" and "via e-mail" in entry.summary
    # Single use: the same link again changes nothing.
    again = browser.post(path, {"answer": answer})
    assert again.status_code == 410
    assert answered(row) == 1
    # Opened again, it says so and what became of the item (docs/operating.md).
    reopened = browser.get(path)
    text = reopened.content.decode()
    assert reopened.status_code == 200 and "was used already" in text
    assert "The item is resolved (answered by rita)" in text


def test_the_confirmation_page_posts_with_its_csrf_token(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    browser = Client(enforce_csrf_checks=True)  # as a real browser: no token, no decision
    path = links["rita"]["Approve"]
    assert browser.post(path).status_code == 403 and pending(row)
    page = browser.get(path).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    with django_capture_on_commit_callbacks(execute=True):
        assert browser.post(path, {"csrfmiddlewaretoken": token}).status_code == 200
    assert not pending(row)


def test_respond_without_an_answer_is_refused_and_the_link_stays_usable(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    response = Client().post(links["rita"]["Respond"], {"answer": "   "})
    assert response.status_code == 400 and pending(row)
    assert not EmailActionLink.objects.filter(used_at__isnull=False).exists()


def test_forged_and_expired_links_are_refused_and_change_nothing(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    path = links["rita"]["Approve"]
    token = path.split("/")[2]
    forged = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    browser = Client()
    assert browser.get(f"/e/{forged}/").status_code == 404
    assert browser.post(f"/e/{forged}/").status_code == 404
    assert browser.post("/e/not-a-token/").status_code == 404
    EmailActionLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert browser.get(path).status_code == 410
    assert browser.post(path).status_code == 410
    assert pending(row) and answered(row) == 0


def test_a_link_past_its_signed_age_is_refused(
    django_capture_on_commit_callbacks, smtp, settings, requester, reviewer
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    settings.HITL_EMAIL_LINK_MAX_AGE = -1  # the signature's own timestamp is too old now
    assert Client().post(links["rita"]["Approve"]).status_code == 410
    assert pending(row)


def test_a_link_opened_in_another_users_session_is_refused(
    django_capture_on_commit_callbacks, smtp, requester, reviewer, second_reviewer
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    sam = Client()
    sam.force_login(second_reviewer)
    assert sam.get(links["rita"]["Approve"]).status_code == 403
    assert sam.post(links["rita"]["Approve"]).status_code == 403
    assert pending(row)


def test_with_the_login_setting_a_link_needs_the_recipients_session(
    django_capture_on_commit_callbacks, smtp, settings, requester, reviewer
):
    settings.HITL_EMAIL_LINK_REQUIRE_LOGIN = True
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    path = links["rita"]["Approve"]
    anonymous = Client()
    page = anonymous.get(path)
    assert page.status_code == 302 and page["Location"].startswith("/login/")
    assert anonymous.post(path).status_code == 302
    assert pending(row)
    rita = Client()
    rita.force_login(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        assert rita.post(path).status_code == 200
    assert not pending(row)


def test_four_eyes_and_claims_hold_for_email_links(
    django_capture_on_commit_callbacks, four_eyes_mailed, reviewer, second_reviewer
):
    row, links = four_eyes_mailed
    browser = Client()
    with django_capture_on_commit_callbacks(execute=True):
        first = browser.post(links["rita"]["Approve"])
    assert "1 of 2 approvals" in first.content.decode() and pending(row)

    # rita claims it ("I'm on it"): sam's link is refused, naming her ...
    claims.interrupt_claim(interrupt_id=row.pk, user=reviewer)
    refused = browser.post(links["sam"]["Approve"])
    assert refused.status_code == 409 and "rita is on it" in refused.content.decode()
    assert pending(row)
    assert EmailActionLink.objects.get(user=second_reviewer, response_type="accept").used_at is None
    # ... until he confirms he decides anyway: the second approval resolves it.
    with django_capture_on_commit_callbacks(execute=True):
        done = browser.post(links["sam"]["Approve"], {"override_claim": "1"})
    assert done.status_code == 200
    row.refresh_from_db()
    assert (row.status, row.responded_by) == ("resolved", second_reviewer)


def test_the_requester_cannot_approve_their_own_thread_by_email(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    requester.groups.add(reviewer.groups.get())
    (row,), links = mailed(
        django_capture_on_commit_callbacks,
        smtp,
        requester,
        [requester],
        human_interrupt(approvals=2),
    )
    # The mail offers no Approve that could only be refused, and says why.
    assert set(links["quinn"]) == {"Ignore", "Respond"}
    (message,) = smtp.messages()
    why = "No Approve link: You requested this thread, so you cannot approve its actions"
    assert why in " ".join(text_of(message).split())
    assert why in " ".join(html_of(message).split())
    assert not EmailActionLink.objects.filter(user=requester, response_type="accept").exists()
    # A link minted before (an older mail) is refused up front, with nothing to confirm.
    token = dict(email_links.email_links_create(row=row, user=reviewer))["accept"]
    EmailActionLink.objects.filter(token_hash=EmailActionLink.hash_token(token)).update(
        user=requester
    )
    page = Client().get(f"/e/{token}/")
    assert "requested this thread" in page.content.decode()
    assert "Confirm: Approve" not in page.content.decode()
    refused = Client().post(f"/e/{token}/")
    assert refused.status_code == 403 and "requested this thread" in refused.content.decode()
    assert "Confirm: Approve" not in refused.content.decode()
    assert pending(row) and answered(row) == 0


def test_after_a_four_eyes_refusal_the_mail_page_offers_no_approve_again(
    django_capture_on_commit_callbacks, four_eyes_mailed, reviewer
):
    row, links = four_eyes_mailed
    rita = Client()
    rita.force_login(reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        rita.post(f"/interrupts/{row.pk}/decide/", {"type": "accept"})
    assert pending(row)
    # Her mail's Approve now could only be refused: the page says so, and offers nothing.
    page = Client().get(links["rita"]["Approve"])
    text = page.content.decode()
    assert "You have approved these args already" in text and "Confirm: Approve" not in text
    refused = Client().post(links["rita"]["Approve"])
    assert refused.status_code == 409 and "already approved" in refused.content.decode()
    assert "Confirm: Approve" not in refused.content.decode()
    # sam's link still approves: the second pair of eyes.
    assert "Confirm: Approve" in Client().get(links["sam"]["Approve"]).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        assert Client().post(links["sam"]["Approve"]).status_code == 200
    assert not pending(row)


def test_a_decision_by_email_can_be_undone_within_the_grace_period(
    django_capture_on_commit_callbacks, smtp, settings, requester, reviewer
):
    settings.HITL_UNDO_SECONDS = 30
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    path = links["rita"]["Approve"]
    browser = Client()
    with django_capture_on_commit_callbacks(execute=True):
        done = browser.post(path)
    assert "Undo" in done.content.decode() and not pending(row)
    with django_capture_on_commit_callbacks(execute=True):
        undone = browser.post(path + "undo/")
    assert undone.status_code == 200 and pending(row)
    assert AuditEvent.objects.filter(interrupt_id=row.pk, kind="interrupt.undone").exists()


def test_the_preferences_page_shows_the_address_and_sends_a_test(smtp, reviewer):
    with_email(reviewer, "rita@example.com")
    browser = Client()
    browser.force_login(reviewer)
    page = browser.get("/settings/notifications/").content.decode()
    assert "rita@example.com" in page and "Send me a test" in page
    response = browser.post("/settings/notifications/test/")
    assert response.status_code == 302
    (message,) = smtp.messages()
    assert message["To"] == "rita@example.com" and message["Subject"] == "[HITL] Test message"


def test_without_an_address_the_test_says_so(reviewer, mailoutbox):
    browser = Client()
    browser.force_login(reviewer)
    page = browser.post("/settings/notifications/test/", follow=True).content.decode()
    assert "no e-mail address" in page and mailoutbox == []


def test_the_sweep_deletes_links_a_day_past_their_expiry(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    from hitl.ops.notifications import notify_sweep

    mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    assert EmailActionLink.objects.count() == 3
    now = timezone.now()
    EmailActionLink.objects.filter(response_type="accept").update(
        expires_at=now - timedelta(days=1, seconds=1)
    )
    assert notify_sweep(now=now)["pruned_links"] == 1
    assert sorted(EmailActionLink.objects.values_list("response_type", flat=True)) == [
        "ignore",
        "response",
    ]


def test_the_confirmation_page_masks_credentials_like_the_email(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), links = mailed(
        django_capture_on_commit_callbacks,
        smtp,
        requester,
        [reviewer],
        human_interrupt("call_api", {"url": "https://x.example", "api_key": "sk-live-123"}),
    )
    page = Client().get(links["rita"]["Approve"]).content.decode()
    assert "https://x.example" in page and "[hidden]" in page and "sk-live-123" not in page
