"""Single sign-on in real headless Chromium: a real daphne configured for the test OIDC
provider (a real `oidc-provider` process), the provider's own login form, back to the
inbox with the groups the claim gives; logout ends the session."""

from __future__ import annotations

import socket

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from tests.conftest import free_port, service_env, spawn, wait_for, web_command
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser_axe import axe_violations
from tests.sso.conftest import OidcProvider, start_provider

chromium = base.chromium

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


@pytest.fixture
def sso_server_for(test_database_url, tmp_path, transactional_db):
    """Start daphne with single sign-on against a provider that knows its redirect URI."""
    started = []

    def start(**env: str) -> tuple[str, OidcProvider]:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        provider = start_provider(tmp_path, [f"{base_url}/sso/callback/"])
        started.append(provider.proc)
        proc = spawn(
            web_command(port),
            service_env(test_database_url, **provider.env(), **env),
            tmp_path / "daphne.log",
        )
        started.append(proc)

        def up() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        wait_for(up, 30, 0.1, "daphne to listen")
        return base_url, provider

    yield start
    for proc in reversed(started):
        proc.stop()


@pytest.fixture
def sso_server(sso_server_for) -> tuple[str, OidcProvider]:
    return sso_server_for()


@pytest.fixture
def browser(chromium, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


def sign_in(page, base_url: str, login: str) -> None:
    page.goto(f"{base_url}/login/")
    page.click("#sso-login")
    page.wait_for_selector("input[name=login]")  # the provider's own login form
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def test_a_reviewer_signs_in_through_the_provider_and_lands_with_the_right_groups(
    sso_server, browser, chromium, requester, reviewers_group
):
    base_url, provider = sso_server
    _, (row,) = open_interrupts(
        user=requester, values=[human_interrupt("pay_invoice")], title="SSO inbox"
    )
    page = browser.new_page()
    page.set_default_timeout(base.TIMEOUT_MS)
    page.goto(f"{base_url}/login/")
    assert page.inner_text("#sso-login") == "Sign in with single sign-on"
    base.ARTIFACTS.mkdir(exist_ok=True)
    base.shot(page, "sso-login-page")
    # The login page with SSO passes axe-core too (a context that lets axe in).
    checker = chromium.new_context(bypass_csp=True)
    try:
        axe_page = checker.new_page()
        axe_page.goto(f"{base_url}/login/")
        assert axe_violations(axe_page) == []
    finally:
        checker.close()
    sign_in(page, base_url, "fin.sso")

    user = get_user_model().objects.get(username="fin.sso")
    assert set(user.groups.values_list("name", flat=True)) == {"reviewers", "finance"}
    assert page.locator(f"#row-{row.pk}").is_visible()
    assert "fin.sso" in page.inner_text("header")

    # Logout ends the HITL session: its row is gone and the cookie opens nothing.
    key = next(c["value"] for c in browser.cookies() if c["name"] == "sessionid")
    assert Session.objects.filter(session_key=key).exists()
    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{base_url}/login/")
    assert not Session.objects.filter(session_key=key).exists()
    page.goto(f"{base_url}/")
    assert page.url.startswith(f"{base_url}/login/")


def test_a_reviewer_dropped_from_the_idp_group_no_longer_sees_the_item_after_signing_in_again(
    sso_server, browser, requester, reviewers_group
):
    base_url, provider = sso_server
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt()], title="Dropped")
    page = browser.new_page()
    page.set_default_timeout(base.TIMEOUT_MS)
    sign_in(page, base_url, "rita.sso")
    assert page.locator(f"#row-{row.pk}").is_visible()
    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{base_url}/login/")

    provider.set_groups("rita.sso", ["marketing"])
    browser.clear_cookies()  # a new day: no session at the provider either
    sign_in(page, base_url, "rita.sso")
    assert page.locator(f"#row-{row.pk}").count() == 0
    rita = get_user_model().objects.get(username="rita.sso")
    assert not rita.groups.exists()
    assert page.goto(f"{base_url}/threads/{row.thread_id}/").status == 404


def test_logout_at_the_provider_ends_both_sessions_and_comes_back(sso_server_for, browser):
    base_url, provider = sso_server_for(HITL_OIDC_LOGOUT_AT_IDP="1")
    page = browser.new_page()
    page.set_default_timeout(base.TIMEOUT_MS)
    sign_in(page, base_url, "rita.sso")
    key = next(c["value"] for c in browser.cookies() if c["name"] == "sessionid")

    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{provider.issuer}/session/end**")  # the provider asks to confirm
    assert not Session.objects.filter(session_key=key).exists()
    page.click("button[name=logout]")
    page.wait_for_url(f"{base_url}/login/")

    # The provider's session is gone too: signing in asks for the password again.
    page.click("#sso-login")
    page.wait_for_selector("input[name=login]")
