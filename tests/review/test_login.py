"""Login throttling (django-axes): a clear lockout after repeated wrong passwords, and an
admin can unlock. Through Django's test client against the real login view; runs on
SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client


def attempt(client: Client, username: str, password: str):
    return client.post(
        "/login/",
        f"username={username}&password={password}",
        content_type="application/x-www-form-urlencoded",
    )


@pytest.fixture
def limit(settings):
    # A fast hasher: each wrong password is checked for real, dozens per test.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    from django.contrib.auth import get_user_model

    for user in get_user_model().objects.all():
        user.set_password(f"pw-{user.username}")
        user.save(update_fields=["password"])
    return settings.AXES_FAILURE_LIMIT


def test_repeated_wrong_passwords_lock_the_account_with_a_clear_message(reviewer, limit):
    client = Client()
    for _ in range(limit - 1):
        wrong = attempt(client, "rita", "wrong")
        assert wrong.status_code == 200
        assert b"Wrong username or password" in wrong.content
    locked = attempt(client, "rita", "wrong")
    assert locked.status_code == 429
    text = locked.content.decode()
    assert "Too many failed logins" in text and "rita" in text
    assert f"after {limit} wrong passwords" in text
    assert "Try again in" in text and "an admin can unlock" in text.lower()
    # Even the right password is refused while locked.
    assert attempt(client, "rita", reviewer_password(reviewer)).status_code == 429
    assert "_auth_user_id" not in client.session


def test_thirty_fast_wrong_passwords_are_not_all_answered_normally(reviewer, limit):
    answers = [attempt(Client(), "rita", f"guess-{i}").status_code for i in range(30)]
    assert answers.count(200) == limit - 1
    assert set(answers[limit - 1 :]) == {429}


def test_a_lockout_does_not_lock_other_users(reviewer, second_reviewer, limit):
    for _ in range(limit):
        attempt(Client(), "rita", "wrong")
    other = attempt(Client(), "sam", reviewer_password(second_reviewer))
    assert other.status_code == 302


def test_an_admin_unlocks_in_the_admin(reviewer, admin_user, limit):
    for _ in range(limit):
        attempt(Client(), "rita", "wrong")
    assert attempt(Client(), "rita", reviewer_password(reviewer)).status_code == 429

    admin_user.refresh_from_db()  # the fixture gave it a fast hash
    admin = Client()
    admin.force_login(admin_user)
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and b"rita" in listing.content
    row = AccessAttempt.objects.get(username="rita")
    deleted = admin.post(f"/admin/axes/accessattempt/{row.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302

    assert attempt(Client(), "rita", reviewer_password(reviewer)).status_code == 302


def test_an_operator_unlocks_from_the_command_line(reviewer, limit):
    for _ in range(limit):
        attempt(Client(), "rita", "wrong")
    call_command("axes_reset_username", "rita")
    assert attempt(Client(), "rita", reviewer_password(reviewer)).status_code == 302


def reviewer_password(user) -> str:
    """tests/conftest.py gives each persona the password "pw-<username>"."""
    return f"pw-{user.username}"
