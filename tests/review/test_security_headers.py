"""Pages carry a strict Content-Security-Policy and the usual security headers, and no
template holds an inline script or handler the policy would block."""

from __future__ import annotations

import re

import pytest
from csp.exceptions import CSPNonceError
from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from django.http import HttpResponse, JsonResponse
from django.test import Client, RequestFactory

from hitl.security import CSPMiddleware
from tests.conftest import ROOT

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
JS_URL = re.compile(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def templates():
    # The project's, and those a package owns (hitl/integrations/<channel>/templates/).
    return sorted(
        [*(ROOT / "templates").rglob("*.html"), *ROOT.glob("hitl/**/templates/**/*.html")]
    )


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


def _policy_of(middleware: CSPMiddleware, host: str, response=None, *, secure: bool = False):
    request = RequestFactory().get("/langgraph/ok", HTTP_HOST=host, secure=secure)
    middleware.process_request(request)
    response = middleware.process_response(request, response or JsonResponse({}))
    return response.get("Content-Security-Policy"), request


def test_a_policy_built_once_per_host_is_the_one_django_csp_builds(settings):
    settings.ALLOWED_HOSTS = ["a.example", "b.example"]
    middleware = CSPMiddleware(lambda request: JsonResponse({}))
    CSPMiddleware._built.clear()
    fresh, _ = _policy_of(middleware, "a.example")
    again, request = _policy_of(middleware, "a.example")
    assert again == fresh and "connect-src 'self' ws://a.example" in again
    library = RequestFactory().get("/langgraph/ok", HTTP_HOST="a.example")
    built = BaseCSPMiddleware.process_response(middleware, library, JsonResponse({}))
    assert again == built["Content-Security-Policy"]
    with pytest.raises(CSPNonceError):  # past the response, as django-csp has it
        str(request.csp_nonce)
    # Another host, or the same over TLS, gets its own connect-src.
    assert "ws://b.example" in _policy_of(middleware, "b.example")[0]
    assert "wss://a.example" in _policy_of(middleware, "a.example", secure=True)[0]
    assert len(CSPMiddleware._built) == 3
    # A host that is not allowed is built as django-csp builds it, and not kept.
    assert "ws://" not in _policy_of(middleware, "c.example")[0]
    assert len(CSPMiddleware._built) == 3

    # A response with a policy of its own keeps it; one exempt gets none.
    sandboxed = HttpResponse()
    sandboxed["Content-Security-Policy"] = "default-src 'none'; sandbox"
    assert _policy_of(middleware, "a.example", sandboxed)[0] == "default-src 'none'; sandbox"
    exempt = HttpResponse()
    exempt._csp_exempt = True
    assert _policy_of(middleware, "a.example", exempt)[0] is None
