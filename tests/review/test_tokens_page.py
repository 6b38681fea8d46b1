"""Users list and revoke their own API tokens on a page; `make run`'s demo token is reused.
Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command
from django.test import Client

from hitl.core.models import ApiToken


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_lists_only_my_tokens(reviewer, second_reviewer):
    mine, _ = ApiToken.issue(user=reviewer, name="laptop")
    theirs, _ = ApiToken.issue(user=second_reviewer, name="ci")
    page = logged_in(reviewer).get("/tokens/")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"hitl_{mine.prefix}" in text and "laptop" in text
    assert theirs.prefix not in text and "ci</td>" not in text


def test_revoking_a_token_stops_it_at_once(reviewer):
    token, key = ApiToken.issue(user=reviewer, name="laptop")
    api = Client()
    assert api.get("/api/v1/interrupts", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    response = logged_in(reviewer).post(f"/tokens/{token.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == "/tokens/"
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    assert api.get("/api/v1/interrupts", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401


def test_nobody_revokes_another_users_token(reviewer, second_reviewer):
    theirs, _ = ApiToken.issue(user=second_reviewer, name="ci")
    assert logged_in(reviewer).post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    assert ApiToken.objects.filter(pk=theirs.pk).exists()
    assert Client().post(f"/tokens/{theirs.pk}/revoke/").status_code == 302  # to login
    assert ApiToken.objects.filter(pk=theirs.pk).exists()


def test_revoking_needs_a_post(reviewer):
    token, _ = ApiToken.issue(user=reviewer)
    assert logged_in(reviewer).get(f"/tokens/{token.pk}/revoke/").status_code == 405
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_the_demo_token_is_reused_across_runs(db, settings, tmp_path):
    settings.VAR_DIR = tmp_path

    def demo_token() -> str:
        out = StringIO()
        call_command("demo_setup", stdout=out)
        return next(line.split()[-1] for line in out.getvalue().splitlines() if "API token" in line)

    first, again = demo_token(), demo_token()
    assert first == again
    assert ApiToken.objects.filter(user__username="reviewer").count() == 1
    assert (tmp_path / "demo_token").stat().st_mode & 0o777 == 0o600
    # Revoked: the next run issues a new one.
    ApiToken.objects.all().delete()
    assert demo_token() != first
