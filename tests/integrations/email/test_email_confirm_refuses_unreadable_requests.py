"""The e-mail one-click confirm page refuses malformed requests with a 4xx and decides nothing.

Tokens, query strings and POST bodies from tests/fuzz_bodies.py (NUL, lone surrogates,
deep nesting, wrong types, ten megabytes) on GET and POST of `/e/<token>/`.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest
from django.test import Client

from hitl.core.models import AuditEvent, EmailActionLink
from tests.fuzz_bodies import json_bodies, text_values
from tests.integrations.email.conftest import mailed


@pytest.fixture
def links(django_capture_on_commit_callbacks, smtp, requester, reviewer):
    """rita's Approve, Ignore and Respond links to one pending item; (row, {label: path})."""
    (row,), found = mailed(django_capture_on_commit_callbacks, smtp, requester, [reviewer])
    return row, found["rita"]


def nothing_decided(row) -> None:
    row.refresh_from_db()
    assert row.status == "pending" and row.responded_by is None
    assert not AuditEvent.objects.filter(
        interrupt_id=row.pk, kind__startswith="interrupt.a"
    ).exists()
    assert not EmailActionLink.objects.filter(used_at__isnull=False).exists()


def bad_token(token: str, value: str) -> str:
    """A token path segment with `value` worked in, percent-encoded as a browser would."""
    return "/e/" + quote((token + value).encode("utf-8", "surrogatepass"), safe="") + "/"


@pytest.mark.parametrize(("name", "value"), text_values())
def test_a_malformed_token_is_refused_on_get_and_post(links, name, value):
    row, paths = links
    token = paths["Approve"].split("/")[2]
    for path in (bad_token(token, value), bad_token("", value)):
        for method in ("get", "post"):
            response = getattr(Client(), method)(path)
            assert 400 <= response.status_code < 500, (name, method, response.status_code)
    nothing_decided(row)


@pytest.mark.parametrize(("name", "value"), text_values())
@pytest.mark.parametrize("label", ["Approve", "Respond"])
def test_a_malformed_query_string_decides_nothing(links, label, name, value):
    row, paths = links
    query = urlencode({"answer": value, "override_claim": value}, errors="surrogatepass")
    response = Client().get(f"{paths[label]}?{query}")
    assert response.status_code < 500, (name, response.status_code)
    nothing_decided(row)


@pytest.mark.parametrize(("name", "raw"), json_bodies())
def test_a_malformed_post_body_to_respond_is_refused(links, name, raw):
    row, paths = links
    path = paths["Respond"]
    for content_type in ("application/json", "application/x-www-form-urlencoded"):
        response = Client().post(path, data=raw, content_type=content_type)
        assert 400 <= response.status_code < 500, (name, content_type, response.status_code)
    nothing_decided(row)


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("nul", "Use the\u0000 EU account"),
        ("lone surrogate", "Use the\ud800 EU account"),
        ("only a surrogate", "\udfff"),
        ("too long", "x" * 100_000),
        ("blank", " \t\n"),
    ],
)
def test_an_answer_that_cannot_be_stored_is_refused_and_the_link_stays_usable(links, name, answer):
    row, paths = links
    form = urlencode({"answer": answer}, errors="surrogatepass")
    response = Client().post(
        paths["Respond"], data=form, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400, (name, response.status_code)
    nothing_decided(row)


def test_a_ten_megabyte_post_is_refused_on_every_link(links):
    row, paths = links
    body = b"answer=" + b"x" * (10 * 1024 * 1024)
    for path in paths.values():
        response = Client().post(path, data=body, content_type="application/x-www-form-urlencoded")
        assert 400 <= response.status_code < 500, (path, response.status_code)
    nothing_decided(row)


@pytest.mark.parametrize("value", [["1"], {"a": 1}, "\u0000", "2"])
def test_a_malformed_override_field_is_refused_or_ignored(links, value):
    row, paths = links
    response = Client().post(
        paths["Respond"],
        data={"answer": "", "override_claim": value} if not isinstance(value, dict) else value,
    )
    assert response.status_code < 500
    nothing_decided(row)
