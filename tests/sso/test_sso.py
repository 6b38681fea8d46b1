"""Single sign-on against a real OpenID Connect provider process (tests/sso/conftest.py):
users created on first login, groups and permissions from the claim at every login, refused
ID tokens (expired, forged, tampered, another audience) that change nothing, passwords
turned off, and logout. Through Django's test client; runs on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import parse_qsl

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from hitl.core.models import SsoIdentity
from tests.conftest import _make_user
from tests.sso.conftest import configure, sso_login

User = get_user_model()


def groups_of(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def signed_in_as(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id).username if user_id else None


def signed_in_sessions() -> int:
    return sum("_auth_user_id" in session.get_decoded() for session in Session.objects.all())


def test_first_login_creates_the_user_with_the_mapped_groups(sso):
    client = Client()
    landed = sso_login(client, "fin.sso")
    assert landed.status_code == 302 and landed["Location"] == "/"
    user = User.objects.get(username="fin.sso")
    assert signed_in_as(client) == "fin.sso"
    assert user.email == "fin@example.com"
    assert groups_of(user) == {"reviewers", "finance"}
    assert not user.has_usable_password()
    identity = SsoIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject) == (sso.issuer, "fin.sso")
    assert identity.claim_values == ["hitl-reviewers", "hitl-finance"]
    inbox = client.get("/")
    assert inbox.status_code == 200 and b"fin.sso" in inbox.content


def test_a_login_returns_to_the_page_it_started_from(sso):
    landed = sso_login(Client(), "rita.sso", next_url="/tokens/")
    assert landed.status_code == 302 and landed["Location"] == "/tokens/"


def test_named_permissions_come_from_the_claim(sso):
    sso_login(Client(), "vera.sso")
    sso_login(Client(), "rex.sso")
    vera, rex = User.objects.get(username="vera.sso"), User.objects.get(username="rex.sso")
    assert vera.has_perm("hitl.review_all") and not vera.has_perm("hitl.run_any_thread")
    assert groups_of(vera) == set()
    assert rex.has_perm("hitl.run_any_thread") and not rex.has_perm("hitl.review_all")
    assert groups_of(rex) == {"reviewers"}


def test_unmapped_idp_groups_give_nothing(sso):
    sso_login(Client(), "oscar.sso")
    oscar = User.objects.get(username="oscar.sso")
    assert groups_of(oscar) == set() and not oscar.user_permissions.exists()
    assert not Group.objects.filter(name="marketing").exists()


def test_a_user_removed_from_an_idp_group_loses_it_at_the_next_login(sso):
    sso_login(Client(), "fin.sso")
    fin = User.objects.get(username="fin.sso")
    # An admin-given group outside the map is the admin's to manage.
    fin.groups.add(Group.objects.create(name="auditors"))
    assert groups_of(fin) == {"reviewers", "finance", "auditors"}

    sso.set_groups("fin.sso", ["hitl-reviewers"])
    again = Client()
    assert sso_login(again, "fin.sso").status_code == 302
    assert signed_in_as(again) == "fin.sso"
    assert User.objects.filter(username__startswith="fin.sso").count() == 1
    assert groups_of(fin) == {"reviewers", "auditors"}


def test_a_user_removed_from_the_leads_loses_the_permission_at_the_next_login(sso):
    sso_login(Client(), "vera.sso")
    assert User.objects.get(username="vera.sso").has_perm("hitl.review_all")
    sso.set_groups("vera.sso", ["hitl-reviewers"])
    sso_login(Client(), "vera.sso")
    vera = User.objects.get(username="vera.sso")  # a fresh permission cache
    assert not vera.has_perm("hitl.review_all")
    assert groups_of(vera) == {"reviewers"}


def test_a_group_granted_at_the_idp_arrives_at_the_next_login(sso):
    sso_login(Client(), "oscar.sso")
    sso.set_groups("oscar.sso", ["marketing", "hitl-finance"])
    sso_login(Client(), "oscar.sso")
    assert groups_of(User.objects.get(username="oscar.sso")) == {"finance"}


def test_a_local_account_with_the_same_name_is_not_taken_over(sso, reviewers_group):
    local = _make_user("rita.sso")
    client = Client()
    sso_login(client, "rita.sso")
    sso_user = SsoIdentity.objects.get(subject="rita.sso").user
    assert sso_user.pk != local.pk and sso_user.username.startswith("rita.sso-")
    assert signed_in_as(client) == sso_user.username
    local.refresh_from_db()
    assert groups_of(local) == set() and local.has_usable_password()


# How the provider misbehaves, and the reason the app logs for refusing it.
REFUSALS = {
    "expired": ({"clock_offset": -3600}, "Signature has expired"),
    "forged": ({"tamper": "forged"}, "Signature verification failed"),
    "tampered": ({"tamper": "payload"}, "Signature verification failed"),
    "wrong audience": ({"tamper": "audience"}, "Audience doesn't match"),
}


@pytest.mark.parametrize("how", list(REFUSALS))
def test_a_bad_id_token_is_refused_and_changes_nothing(sso, how, caplog):
    sso_login(Client(), "rita.sso")
    rita = User.objects.get(username="rita.sso")
    before = (User.objects.count(), SsoIdentity.objects.count(), signed_in_sessions())
    last_login = SsoIdentity.objects.get(user=rita).last_login_at

    sso.set_groups("rita.sso", [])  # an honest login would now take the group away
    misbehaviour, reason = REFUSALS[how]
    sso.misbehave(**misbehaviour)
    client = Client()
    refused = sso_login(client, "rita.sso")
    assert refused.status_code == 400
    assert b"Single sign-on refused the identity provider" in refused.content
    assert reason in caplog.text
    assert signed_in_as(client) is None
    assert client.get("/").status_code == 302
    # Nobody new, nobody signed in, rita's groups and record untouched.
    assert (User.objects.count(), SsoIdentity.objects.count(), signed_in_sessions()) == before
    assert groups_of(rita) == {"reviewers"}
    assert SsoIdentity.objects.get(user=rita).last_login_at == last_login


def test_a_bad_id_token_does_not_create_a_user_on_first_login(sso):
    sso.misbehave(tamper="forged")
    refused = sso_login(Client(), "fin.sso")
    assert refused.status_code == 400
    assert not User.objects.filter(email="fin@example.com").exists()
    assert not Group.objects.filter(name="finance").exists()


def test_a_replayed_callback_is_refused(sso):
    client = Client()
    start = client.get("/sso/login/")
    from tests.sso.conftest import TESTSERVER_CALLBACK, provider_login

    back = provider_login(start["Location"], "rita.sso", TESTSERVER_CALLBACK)
    path = back.removeprefix("http://testserver")
    assert client.get(path).status_code == 302
    client.post("/logout/")
    replay = client.get(path)
    assert replay.status_code in (400, 403)
    assert signed_in_as(client) is None
    # The same answer in another browser (no state of its own) is refused too.
    other = Client()
    assert other.get(path).status_code in (400, 403) and signed_in_as(other) is None


def test_a_callback_with_a_made_up_code_is_refused(sso):
    client = Client()
    client.get("/sso/login/")
    state = next(iter(client.session["oidc_states"]))
    refused = client.get("/sso/callback/", {"code": "made-up", "state": state})
    assert refused.status_code == 400
    assert b"identity provider refused" in refused.content
    assert signed_in_as(client) is None and User.objects.count() == 0


def test_an_idp_error_answer_signs_nobody_in(sso):
    client = Client()
    client.get("/sso/login/")
    state = next(iter(client.session["oidc_states"]))
    refused = client.get("/sso/callback/", {"error": "access_denied", "state": state})
    assert refused.status_code == 403
    assert b"did not sign you in" in refused.content and signed_in_as(client) is None


def test_a_deactivated_user_cannot_sign_in(sso):
    sso_login(Client(), "rita.sso")
    User.objects.filter(username="rita.sso").update(is_active=False)
    client = Client()
    refused = sso_login(client, "rita.sso")
    assert refused.status_code == 403 and signed_in_as(client) is None


def test_deactivating_a_user_ends_their_sso_sessions(sso):
    client = Client()
    sso_login(client, "rita.sso")
    assert client.get("/").status_code == 200
    User.objects.filter(username="rita.sso").update(is_active=False)
    assert client.get("/")["Location"].startswith("/login/")


def test_logout_ends_the_sso_session(sso):
    client = Client()
    sso_login(client, "rita.sso")
    key = client.session.session_key
    assert Session.objects.filter(session_key=key).exists()
    out = client.post("/logout/")
    assert out.status_code == 302 and out["Location"] == "/login/"
    assert not Session.objects.filter(session_key=key).exists()
    # The old cookie opens nothing.
    stale = Client()
    stale.cookies["sessionid"] = key
    assert stale.get("/")["Location"].startswith("/login/")


def test_the_login_page_offers_sso_and_passwords(sso):
    page = Client().get("/login/", {"next": "/tokens/"}).content.decode()
    assert 'href="/sso/login/?next=/tokens/"' in page
    assert "Sign in with single sign-on" in page and 'id="id_password"' in page


def test_with_passwords_off_only_sso_is_offered_and_password_logins_are_refused(
    settings, idp, reviewer, admin_user
):
    configure(settings, idp, password_login=False)
    page = Client().get("/login/").content.decode()
    assert 'id="sso-login"' in page and 'id="id_password"' not in page
    client = Client()
    refused = client.post("/login/", {"username": "rita", "password": "pw-rita"})
    assert refused.status_code == 403
    assert b"Password login is turned off" in refused.content
    assert signed_in_as(client) is None
    admin_login = client.get("/admin/login/", {"next": "/admin/"})
    assert admin_login.status_code == 302 and admin_login["Location"] == "/login/?next=%2Fadmin%2F"
    assert (
        client.post("/admin/login/", {"username": "ada", "password": "pw-ada"}).status_code == 302
    )
    assert signed_in_as(client) is None
    assert sso_login(client, "rita.sso").status_code == 302
    assert signed_in_as(client) == "rita.sso"


def test_passwords_still_work_next_to_sso(sso, reviewer):
    client = Client()
    assert client.post("/login/", {"username": "rita", "password": "pw-rita"}).status_code == 302
    assert signed_in_as(client) == "rita"


def test_an_unreachable_provider_is_a_clear_502(settings, idp):
    configure(settings, idp)
    settings.HITL_OIDC_ISSUER = "http://127.0.0.1:9"  # nothing listens there
    answer = Client().get("/sso/login/")
    assert answer.status_code == 502 and b"cannot be reached" in answer.content


def test_sso_is_off_unless_configured(db):
    assert Client().get("/sso/login/").status_code == 404
    assert Client().get("/sso/callback/", {"code": "x", "state": "y"}).status_code == 404
    assert b"sso-login" not in Client().get("/login/").content


def test_a_malformed_mapping_fails_loudly(monkeypatch):
    from hitl.env import envpairs

    monkeypatch.setenv("HITL_OIDC_GROUP_MAP", "hitl-reviewers=reviewers,finance")
    with pytest.raises(ImproperlyConfigured, match="key=value"):
        envpairs("HITL_OIDC_GROUP_MAP")
    monkeypatch.setenv("HITL_OIDC_GROUP_MAP", "a=x, a=y")
    assert envpairs("HITL_OIDC_GROUP_MAP") == [("a", "x"), ("a", "y")]


def test_an_admin_sees_who_signed_in_through_sso(sso, admin_user):
    sso_login(Client(), "fin.sso")
    admin = Client()
    admin.force_login(admin_user)
    listing = admin.get("/admin/hitl/ssoidentity/")
    assert listing.status_code == 200
    assert b"fin.sso" in listing.content and b"hitl-finance" in listing.content
    assert admin.get("/admin/hitl/ssoidentity/add/").status_code == 403


def test_a_next_url_off_the_site_is_ignored(sso):
    landed = sso_login(Client(), "rita.sso", next_url="https://evil.example/")
    assert landed.status_code == 302 and landed["Location"] == "/"


def test_logout_can_end_the_session_at_the_provider_too(sso, settings):
    settings.HITL_OIDC_LOGOUT_AT_IDP = settings.OIDC_STORE_ID_TOKEN = True
    client = Client()
    sso_login(client, "rita.sso")
    key = client.session.session_key
    out = client.post("/logout/")
    assert out.status_code == 302
    end, _, query = out["Location"].partition("?")
    assert end == f"{sso.issuer}/session/end"
    params = dict(parse_qsl(query))
    assert params["post_logout_redirect_uri"] == "http://testserver/login/"
    assert params["client_id"] == "hitl" and params["id_token_hint"].count(".") == 2
    assert not Session.objects.filter(session_key=key).exists()
    # The provider accepts the hint and the return address (it answers a bad one with 400).
    confirm = httpx.get(out["Location"], timeout=20)
    assert confirm.status_code == 200 and "logout" in confirm.text.lower()
    elsewhere = out["Location"].replace("testserver", "evil.example")
    assert httpx.get(elsewhere, timeout=20).status_code == 400


def test_sso_settings_without_a_secret_fail_loudly(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HITL_VAR_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "hitl.settings",
        "HITL_OIDC_ISSUER": "https://sso.example.com",
        "HITL_OIDC_CLIENT_ID": "hitl",
    }
    run = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "HITL_OIDC_CLIENT_SECRET" in run.stderr
    run = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "HITL_OIDC_CLIENT_SECRET": "s", "HITL_PASSWORD_LOGIN": "maybe"},
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "HITL_PASSWORD_LOGIN must be a boolean" in run.stderr
