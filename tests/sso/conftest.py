"""A real OpenID Connect provider for the SSO tests, and a login through it.

tests/sso/oidc_provider.mjs runs the certified `oidc-provider` package from npm
(`scripts/ensure-oidc-provider`, run by `make test`, installs it into var/node/oidc). The
app talks to it over HTTP exactly as to a company IdP: discovery, authorization, token,
userinfo and JWKS endpoints. Its login form is driven with httpx (Django test client
logins) or by Chromium (browser tests).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from django.test import Client

from tests.conftest import ROOT, Proc, free_port, spawn, wait_for

PROVIDER_SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
PROVIDER_MODULE = ROOT / "var" / "node" / "oidc" / "node_modules" / "oidc-provider"
CLIENT_ID = "hitl"
CLIENT_SECRET = "hitl-test-client-secret"
TESTSERVER_CALLBACK = "http://testserver/sso/callback/"

# The IdP's groups -> HITL's reviewer groups and named permissions (as an operator sets them).
GROUP_MAP = [("hitl-reviewers", "reviewers"), ("hitl-finance", "finance")]
PERMISSION_MAP = [
    ("hitl-leads", "hitl.review_all"),
    ("hitl-operators", "hitl.run_any_thread"),
]

USERS = {
    "rita.sso": {"email": "rita@example.com", "name": "Rita", "groups": ["hitl-reviewers"]},
    "fin.sso": {
        "email": "fin@example.com",
        "name": "Fin",
        "groups": ["hitl-reviewers", "hitl-finance"],
    },
    "oscar.sso": {"email": "oscar@example.com", "name": "Oscar", "groups": ["marketing"]},
    "vera.sso": {"email": "vera@example.com", "name": "Vera", "groups": ["hitl-leads"]},
    "rex.sso": {
        "email": "rex@example.com",
        "name": "Rex",
        "groups": ["hitl-reviewers", "hitl-operators"],
    },
}


class OidcProvider:
    """The provider process and the state file it re-reads on every request."""

    def __init__(self, directory: Path, redirect_uris: list[str]):
        self.state_path = directory / "oidc-state.json"
        self.state: dict[str, Any] = {
            "clients": [
                {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": redirect_uris,
                    "post_logout_redirect_uris": [
                        uri.replace("/sso/callback/", "/login/") for uri in redirect_uris
                    ],
                }
            ],
            "users": json.loads(json.dumps(USERS)),
            "clock_offset": 0,
            "tamper": None,
        }
        self._write()
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.proc: Proc = spawn(
            ["node", str(PROVIDER_SCRIPT), str(self.port), str(self.state_path)],
            {**os.environ, "PATH": _path()},
            directory / "oidc-provider.log",
        )
        wait_for(
            lambda: "READY" in self.proc.output() or self.proc.popen.poll() is not None,
            60,
            0.05,
            "the OIDC provider to start",
        )
        if self.proc.popen.poll() is not None:
            raise AssertionError(f"the OIDC provider exited:\n{self.proc.output()[-3000:]}")

    def _write(self) -> None:
        self.state_path.write_text(json.dumps(self.state))

    def set_groups(self, login: str, groups: list[str]) -> None:
        self.state["users"][login]["groups"] = groups
        self._write()

    def misbehave(
        self, *, clock_offset: int = 0, tamper: str | None = None, id_token: Any = None
    ) -> None:
        """Issue tokens from another clock, or tamper with the ID token ("replace": `id_token`)."""
        self.state.update(clock_offset=clock_offset, tamper=tamper, id_token=id_token)
        self._write()

    def set_claims(self, login: str, **claims: Any) -> None:
        """Change what the provider says about `login` (email, email_verified, name, groups)."""
        self.state["users"][login].update(claims)
        self._write()

    def env(self) -> dict[str, str]:
        """The app's settings for this provider, as an operator would set them."""
        return {
            "HITL_OIDC_ISSUER": self.issuer,
            "HITL_OIDC_CLIENT_ID": CLIENT_ID,
            "HITL_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "HITL_OIDC_GROUP_MAP": ",".join(f"{k}={v}" for k, v in GROUP_MAP),
            "HITL_OIDC_PERMISSION_MAP": ",".join(f"{k}={v}" for k, v in PERMISSION_MAP),
        }

    def stop(self) -> None:
        self.proc.stop()


def _path() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: install Node.js for the SSO tests (apt-get install npm).")
    return f"{Path(node).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def start_provider(directory: Path, redirect_uris: list[str]) -> OidcProvider:
    if not PROVIDER_MODULE.exists():
        pytest.fail("oidc-provider is missing: run `make test` (scripts/ensure-oidc-provider).")
    return OidcProvider(directory, redirect_uris)


@pytest.fixture(scope="module")
def oidc_provider(tmp_path_factory) -> Iterator[OidcProvider]:
    """One provider per test module; each test starts from the default users, honest."""
    provider = start_provider(tmp_path_factory.mktemp("oidc"), [TESTSERVER_CALLBACK])
    yield provider
    provider.stop()


@pytest.fixture
def idp(oidc_provider, db) -> Iterator[OidcProvider]:
    oidc_provider.state["users"] = json.loads(json.dumps(USERS))
    oidc_provider.misbehave()
    yield oidc_provider
    oidc_provider.misbehave()


def configure(settings, provider: OidcProvider, *, password_login: bool = True) -> None:
    """The settings hitl/settings.py derives from provider.env(), for in-process tests."""
    from hitl.review import sso

    sso._discovery.clear()
    settings.HITL_OIDC_ISSUER = provider.issuer
    settings.HITL_OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.HITL_SSO = True
    settings.HITL_OIDC_GROUP_MAP = GROUP_MAP
    settings.HITL_OIDC_PERMISSION_MAP = PERMISSION_MAP
    settings.HITL_PASSWORD_LOGIN = password_login
    settings.OIDC_RP_SCOPES = "openid email profile groups"
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS"):
        setattr(settings, f"OIDC_OP_{name}_ENDPOINT", "")
    settings.OIDC_USE_PKCE = True
    settings.OIDC_TIMEOUT = 10.0
    settings.OIDC_AUTHENTICATION_CALLBACK_URL = "sso-callback"
    settings.LOGIN_REDIRECT_URL_FAILURE = "/login/"
    settings.HITL_OIDC_LEEWAY = 60
    backends = [b for b in settings.AUTHENTICATION_BACKENDS if not b.endswith("SsoBackend")]
    if not password_login:
        backends = [b for b in backends if not b.endswith("ModelBackend")]
    settings.AUTHENTICATION_BACKENDS = [*backends, "hitl.review.sso.SsoBackend"]


@pytest.fixture
def sso(settings, idp) -> OidcProvider:
    """Single sign-on on, against the test provider (passwords still allowed)."""
    configure(settings, idp)
    return idp


def provider_login(authorize_url: str, login: str, until: str) -> str:
    """Sign in at the provider's own login form; the URL it sends the browser back to."""
    with httpx.Client(follow_redirects=False, timeout=20) as browser:
        url = authorize_url
        for _ in range(10):
            if url.startswith(until):
                return url
            response = browser.get(url)
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["location"])
                continue
            assert response.status_code == 200, (response.status_code, response.text[:500])
            action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
            assert action and 'name="login"' in response.text, response.text[:500]
            posted = browser.post(
                urljoin(url, action.group(1)),
                data={"prompt": "login", "login": login, "password": "any password"},
            )
            assert posted.status_code in (302, 303), (posted.status_code, posted.text[:500])
            url = urljoin(url, posted.headers["location"])
        raise AssertionError(f"the provider never sent back to {until}: {url}")


def sso_login(client: Client, login: str, next_url: str = ""):
    """Sign `login` in through the provider; the app's answer to the callback."""
    start = client.get("/sso/login/", {"next": next_url} if next_url else {})
    assert start.status_code == 302, start.content[:500]
    back = provider_login(start["Location"], login, TESTSERVER_CALLBACK)
    parts = urlsplit(back)
    return client.get(f"{parts.path}?{parts.query}")
