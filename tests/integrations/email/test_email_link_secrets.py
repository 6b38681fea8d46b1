"""One-click e-mail links are credentials: the database keeps only their hashes, the stored
copy of the message, admin and the logs never show one, and the mailed link still works
once. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import timedelta

from django.contrib.auth.models import Permission
from django.core import serializers
from django.test import Client
from django.utils import timezone

from hitl.core.models import EmailActionLink, Notification
from hitl.logcontext import JsonFormatter
from hitl.ops.notifications import notification_attempt
from tests.conftest import _make_user
from tests.integrations.email.conftest import PUBLIC, mailed, pending
from tests.ops.notify_helpers import SmtpServer, text_of, with_email
from tests.review.conftest import human_interrupt, open_interrupts


def _tokens(links: dict) -> list[str]:
    return [path.split("/")[2] for path in links.values()]


def _stored(model) -> str:
    return serializers.serialize("json", model.objects.all())


def test_the_database_holds_only_hashes_and_the_mailed_link_works_once(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    tokens = _tokens(links["rita"])
    assert len(tokens) == 3
    stored = _stored(EmailActionLink) + _stored(Notification)
    assert not any(token in stored for token in tokens)
    hashes = set(EmailActionLink.objects.values_list("token_hash", flat=True))
    assert hashes == {hashlib.sha256(t.encode()).hexdigest() for t in tokens}
    # The stored copy of the message says where the links were, not what they were.
    note = Notification.objects.get(user=reviewer)
    assert f"{PUBLIC}/e/hidden/" in note.body and "/e/hidden/" in note.payload["html"]

    browser = Client()
    assert browser.post(links["rita"]["Approve"]).status_code == 200
    assert not pending(row)
    assert browser.post(links["rita"]["Approve"]).status_code == 410


def test_a_view_only_staff_user_and_a_superuser_see_no_one_click_token_in_admin(
    django_capture_on_commit_callbacks, smtp, requester, reviewer
):
    _, links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    tokens = _tokens(links["rita"])
    note = Notification.objects.get(user=reviewer)
    viewer = _make_user("vic", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_notification", content_type__app_label="hitl")
    )
    boss = _make_user("ada", is_staff=True, is_superuser=True)
    pages = [
        "/admin/hitl/notification/",
        f"/admin/hitl/notification/{note.pk}/change/",
        f"/admin/hitl/notification/{note.pk}/history/",
    ]
    for user in (viewer, boss):
        client = Client()
        client.force_login(user)
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, (user, page)
            html = response.content.decode()
            assert not any(token in html for token in tokens), (user, page)
        # The message itself is still there to read (minus its credentials).
        assert "hidden" in client.get(pages[1]).content.decode()


def test_the_logs_hold_no_one_click_token(
    django_capture_on_commit_callbacks, smtp, requester, reviewer, second_reviewer, caplog
):
    (row,), links = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    tokens = _tokens(links["rita"])
    sam = Client()
    sam.force_login(second_reviewer)
    with caplog.at_level(logging.INFO):
        # Refused (and so logged by Django with its path): opened in another user's session.
        assert sam.post(links["rita"]["Approve"]).status_code == 403
        assert Client().post(links["rita"]["Ignore"]).status_code == 200
        assert Client().post(links["rita"]["Ignore"]).status_code == 410
    as_json = JsonFormatter()
    logged = "\n".join(r.getMessage() + as_json.format(r) for r in caplog.records)
    assert "Forbidden: /e/hidden/" in logged
    assert not any(token in logged for token in tokens)


def test_a_retried_mail_carries_fresh_links_that_work_and_stores_none(
    django_capture_on_commit_callbacks, tmp_path, settings, requester, reviewer
):
    server = SmtpServer(tmp_path)  # not listening yet: the first attempt fails
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", server.port, 2
    with_email(reviewer, "rita@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        _, (row,) = open_interrupts(user=requester, values=[human_interrupt()])
    (note,) = Notification.objects.filter(user=reviewer)
    later = timezone.now() + timedelta(hours=1)
    assert notification_attempt(notification_id=note.pk, now=later) is not None

    server.start()
    try:
        assert notification_attempt(notification_id=note.pk, now=later) is None
        (message,) = server.messages()
    finally:
        server.stop()
    found = dict(re.findall(r"^\s+(Approve|Ignore|Respond): (\S+)$", text_of(message), re.M))
    assert set(found) == {"Approve", "Ignore", "Respond"}
    tokens = [url.split("/")[4] for url in found.values()]
    note.refresh_from_db()
    assert note.status == "sent"
    stored = _stored(EmailActionLink) + _stored(Notification)
    assert not any(token in stored for token in tokens)
    assert Client().post(found["Approve"][len(PUBLIC) :]).status_code == 200
    assert not pending(row)
