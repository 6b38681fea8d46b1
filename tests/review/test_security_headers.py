"""Pages carry a strict Content-Security-Policy and the usual security headers, and no
template holds an inline script or handler the policy would block."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.conftest import ROOT

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
JS_URL = re.compile(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def templates():
    return sorted((ROOT / "templates").rglob("*.html"))


@pytest.mark.parametrize("path", templates(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_has_inline_script(path):
    text = path.read_text()
    assert not INLINE_SCRIPT.search(text), INLINE_SCRIPT.search(text).group(0)
    assert not INLINE_HANDLER.search(text), INLINE_HANDLER.search(text).group(0)
    assert not JS_URL.search(text)


@pytest.mark.parametrize("page", ["/", "/analytics/", "/login/"])
def test_pages_send_a_strict_policy_and_the_usual_headers(admin_user, page):
    client = Client()
    if page != "/login/":
        client.force_login(admin_user)
    response = client.get(page)
    assert response.status_code == 200
    policy = dict(
        part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";")
    )
    assert policy["script-src"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["default-src"] == "'self'"
    # The live socket's origin is named: 'self' covers ws: only in full CSP 3 browsers.
    assert policy["connect-src"] == "'self' ws://testserver"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "camera=()" in response["Permissions-Policy"]
