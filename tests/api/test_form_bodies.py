"""Every form and multipart parser error is a 400 that says what is wrong, on every route
that takes a body (issue 27, item 8): through Django's test client and a real daphne.

A multipart body without a boundary is refused before any view (`hitl.inputs`); one
whose part header is over Django's 1 KB limit is refused by whichever parser reads it
(ninja's, Django's form parsing, the CSRF check). A route that never reads its body
answers as it would without one, never with a 5xx.
"""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest
from django.test import Client
from django.urls import URLPattern
from hypothesis import given, settings
from hypothesis import strategies as st

from hitl.api.agui import api as agui_api
from hitl.api.langgraph.api import api as langgraph_api
from hitl.api.v1 import api as v1_api
from tests.api.conftest import start_daphne, token_for

NO_BOUNDARY = (
    "multipart/form-data",
    b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nv\r\n--b--\r\n',
)
LONG_HEADER = (
    "multipart/form-data; boundary=b",
    b'--b\r\nContent-Disposition: form-data; name="a"; x="'
    + b"x" * 1100
    + b'"\r\n\r\nv\r\n--b--\r\n',
)
BODIES = {"no-boundary": NO_BOUNDARY, "long-part-header": LONG_HEADER}
SAYS = {"no-boundary": "boundary", "long-part-header": "header size"}


def api_routes() -> list[tuple[str, str]]:
    """(method, path template) of every POST/PUT/PATCH in the three OpenAPI documents."""
    routes = []
    for api in (v1_api, langgraph_api, agui_api):
        for path, operations in api.get_openapi_schema()["paths"].items():  # with the prefix
            routes += [(m.upper(), path) for m in operations if m in ("post", "put", "patch")]
    return routes


def page_routes() -> list[tuple[str, str]]:
    """Every page and admin route, for POST (a page that takes no POST answers 405)."""
    from hitl import urls

    routes = []
    for entry in urls.urlpatterns:
        if isinstance(entry, URLPattern):
            routes.append(("POST", "/" + str(entry.pattern)))
    # Admin: its login form and a changelist action form.
    routes += [("POST", "/admin/login/"), ("POST", "/admin/hitl/thread/")]
    # Last: it may end the session the other pages are called with.
    routes.sort(key=lambda route: route[1] == "/logout/")
    return routes


# The routes whose views (or CSRF check) read the body: a long part header is a 400 there.
READ_THEIR_BODY = {
    ("POST", "/api/v1/threads/{thread_id}/files"),
    ("POST", "/login/"),
    ("POST", "/threads/new/"),
    ("POST", "/interrupts/bulk/"),
    ("POST", "/settings/notifications/"),
    ("POST", "/admin/login/"),
}
# Named in the issue: a JSON 500 there before.
RUN_CANCEL = {
    ("POST", "/langgraph/threads/{thread_id}/runs/{run_id}/cancel"),
    ("POST", "/langgraph/runs/cancel"),
}


def concrete(path: str) -> str:
    path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)
    path = re.sub(r"<uuid:[^>]+>", str(uuid.uuid4()), path)
    path = re.sub(r"<int:[^>]+>", "1", path)
    return re.sub(r"<(str:)?[^>]+>", "x", path)


def detail(status: int, content_type: str, body: bytes) -> str:
    if "json" in content_type:
        return json.loads(body)["detail"]
    return body.decode(errors="replace")


def judge(kind: str, route: tuple[str, str], status: int, content_type: str, body: bytes) -> str:
    """'ok', or what is wrong with this answer."""
    if status >= 500:
        return f"{status}: {body[:200]!r}"
    # A route that reads no form answers with its own 4xx (a JSON route: "not valid JSON").
    if kind == "no-boundary" or route in READ_THEIR_BODY:
        if status != 400:
            return f"{status} instead of 400"
        text = detail(status, content_type, body)
        if SAYS[kind] not in text:
            return f"400 without saying what is wrong: {text[:200]!r}"
    return "ok"


ROUTES = api_routes() + page_routes()


def test_the_routes_cover_the_upload_the_cancels_and_the_forms():
    assert ("POST", "/api/v1/threads/{thread_id}/files") in ROUTES
    assert set(ROUTES) >= RUN_CANCEL
    assert set(ROUTES) >= READ_THEIR_BODY
    assert len(ROUTES) > 50


@pytest.fixture
def signed_in(requester, settings, tmp_path) -> tuple[Client, dict[str, str]]:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    client = Client()
    client.force_login(requester)
    return client, {"HTTP_AUTHORIZATION": f"Bearer {token_for(requester)}"}


@pytest.mark.parametrize("kind", BODIES)
def test_every_route_answers_a_bad_form_body_with_a_400_that_says_why(signed_in, kind):
    client, headers = signed_in
    content_type, body = BODIES[kind]
    wrong = {}
    for route in ROUTES:
        method, path = route
        call = getattr(client, method.lower())
        response = call(concrete(path), body, content_type=content_type, **headers)
        verdict = judge(
            kind, route, response.status_code, response.get("Content-Type", ""), response.content
        )
        if verdict != "ok":
            wrong[f"{method} {path}"] = verdict
    assert wrong == {}


@pytest.fixture(scope="module")
def daphne(test_database_url, tmp_path_factory):
    proc, base_url = start_daphne(
        test_database_url, tmp_path_factory.mktemp("forms") / "daphne.log"
    )
    yield base_url
    proc.stop()


CSRF = "a" * 32


@pytest.mark.postgres
@pytest.mark.parametrize("kind", BODIES)
def test_every_route_through_daphne_answers_a_bad_form_body_with_a_400(
    daphne, transactional_db, requester, kind
):
    page = Client()
    page.force_login(requester)
    cookies = {"sessionid": page.cookies["sessionid"].value, "csrftoken": CSRF}
    headers = {"Authorization": f"Bearer {token_for(requester)}", "X-CSRFToken": CSRF}
    content_type, body = BODIES[kind]
    wrong = {}
    with httpx.Client(base_url=daphne, cookies=cookies, timeout=30) as http:
        for route in ROUTES:
            method, path = route
            response = http.request(
                method,
                concrete(path),
                content=body,
                headers={**headers, "Content-Type": content_type},
            )
            verdict = judge(
                kind,
                route,
                response.status_code,
                response.headers.get("content-type", ""),
                response.content,
            )
            if verdict != "ok":
                wrong[f"{method} {path}"] = verdict
    assert wrong == {}


# --- fuzzing: generated multipart bodies on every route, through daphne ----------------

_boundaries = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=0, max_size=80
)
_header_values = st.one_of(
    st.just('form-data; name="file"; filename="a.txt"'),
    st.just('form-data; name="values"'),
    st.text(max_size=40),
    st.binary(max_size=1500).map(lambda b: b.decode("latin-1")),
)
_parts = st.lists(
    st.tuples(_header_values, st.binary(max_size=200), st.booleans()), min_size=0, max_size=4
)


@st.composite
def multipart_requests(draw):
    boundary = draw(_boundaries)
    content_type = draw(
        st.sampled_from(
            [
                f"multipart/form-data; boundary={boundary}",
                f'multipart/form-data; boundary="{boundary}"',
                "multipart/form-data",
                f"multipart/mixed; boundary={boundary}",
                f"multipart/form-data; charset=utf-8; boundary={boundary}",
            ]
        )
    )
    body = b""
    for header, content, closed in draw(_parts):
        body += f"--{boundary}\r\n".encode("latin-1", "replace")
        body += b"Content-Disposition: " + header.encode("latin-1", "replace") + b"\r\n"
        body += (b"\r\n" if closed else b"") + content + b"\r\n"
    if draw(st.booleans()):
        body += f"--{boundary}--\r\n".encode("latin-1", "replace")
    return content_type, body


@pytest.mark.postgres
def test_generated_multipart_bodies_never_get_a_5xx_through_daphne(
    daphne, transactional_db, requester
):
    page = Client()
    page.force_login(requester)
    cookies = {"sessionid": page.cookies["sessionid"].value, "csrftoken": CSRF}
    headers = {"Authorization": f"Bearer {token_for(requester)}", "X-CSRFToken": CSRF}
    failures: list[str] = []
    routes = [route for route in ROUTES if route[1] != "/logout/"]
    sent = 0

    with httpx.Client(base_url=daphne, cookies=cookies, timeout=30) as http:

        @settings(max_examples=60, deadline=None, database=None, derandomize=True)
        @given(st.sampled_from(routes), multipart_requests())
        def check(route, request):
            nonlocal sent
            content_type, body = request
            method, path = route
            response = http.request(
                method,
                concrete(path),
                content=body,
                headers={**headers, "Content-Type": content_type},
            )
            sent += 1
            if response.status_code >= 500:
                failures.append(f"{method} {path} {content_type!r}: {response.status_code}")

        check()
    assert sent >= 60
    assert failures == []
