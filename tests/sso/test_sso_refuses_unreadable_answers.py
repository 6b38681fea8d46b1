"""The SSO callback refuses what it cannot trust or read, on the sign-in page, never a 500.

The real provider (tests/sso/conftest.py) answers with an unsigned ID token, with any JSON
value in its place, or with claims a database cannot store; the callback's own query
string is fuzzed too. Nobody is signed in and nothing is stored.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from hitl.core.models import SsoIdentity
from tests.fuzz_bodies import DEPTH, json_bodies, text_values
from tests.sso.conftest import sso_login

User = get_user_model()


def nothing_stored(client: Client) -> None:
    assert "_auth_user_id" not in client.session
    assert User.objects.count() == 0 and SsoIdentity.objects.count() == 0
    assert not Group.objects.exists()


def test_an_unsigned_id_token_is_refused_on_the_sign_in_page_with_a_reason(sso, caplog):
    sso.misbehave(tamper="unsigned")  # `alg: none`, the provider's real claims
    client = Client()
    refused = sso_login(client, "rita.sso")
    assert refused.status_code == 400
    page = refused.content.decode()
    assert 'name="password"' in page or "/sso/login/" in page  # the sign-in page
    assert "Single sign-on refused the identity provider" in page
    assert "not signed" in page  # the reason, in words
    assert "'none'" in caplog.text
    nothing_stored(client)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _jwt(header: bytes, payload: bytes = b'{"sub": "x"}', signature: str = "c2ln") -> str:
    return f"{_b64(header)}.{_b64(payload)}.{signature}"


# What the token endpoint says instead of an ID token: wrong types, broken JWTs, headers
# that are not objects, nest 20k deep, or carry NUL and lone surrogates; and megabytes.
ID_TOKENS = [
    ("a number", 12),
    ("a list", ["a.b.c"]),
    ("an object", {"alg": "RS256"}),
    ("true", True),
    ("empty", ""),
    ("not a jwt", "not-a-jwt"),
    ("nul", "a\u0000b.c.d"),
    ("lone surrogate", "a\ud800b.c.d"),
    ("header not json", _jwt(b"{not json")),
    ("header a list", _jwt(b"[1, 2]")),
    ("header deep", _jwt(("[" * DEPTH + "]" * DEPTH).encode())),
    ("header deep object", _jwt(('{"a":' * DEPTH + "1" + "}" * DEPTH).encode())),
    ("no kid", _jwt(b'{"alg": "RS256"}')),
    ("kid a list", _jwt(b'{"alg": "RS256", "kid": ["hitl-test-key"]}')),
    ("kid with nul", _jwt(b'{"alg": "RS256", "kid": "a\\u0000b"}')),
    ("alg a number", _jwt(b'{"alg": 256, "kid": "hitl-test-key"}')),
    ("alg none upper", _jwt(b'{"alg": "None"}', signature="")),
    ("alg HS256", _jwt(b'{"alg": "HS256", "kid": "hitl-test-key"}')),
    ("payload deep", _jwt(b'{"alg": "RS256", "kid": "hitl-test-key"}', b"[" * 5000)),
    ("huge", "a" * 2_000_000 + ".b.c"),
]


@pytest.mark.parametrize(("name", "id_token"), ID_TOKENS)
def test_an_id_token_that_cannot_be_read_is_refused_and_stores_nothing(sso, name, id_token):
    sso.misbehave(tamper="replace", id_token=id_token)
    client = Client()
    refused = sso_login(client, "rita.sso")
    assert 400 <= refused.status_code < 500, (name, refused.content[:500])
    assert b"Single sign-on" in refused.content
    nothing_stored(client)


# Claims the provider signs honestly, yet no database stores the same way.
BAD_CLAIMS = [
    ("email", "rita\u0000@example.com"),
    ("email", "rita\ud800@example.com"),
    ("name", "Ri\u0000ta"),
    ("groups", ["hitl-reviewers", "evil\u0000"]),
    ("groups", ["hitl-reviewers", "a\udfff"]),
]


@pytest.mark.parametrize(("claim", "value"), BAD_CLAIMS)
def test_claims_that_cannot_be_stored_are_refused_and_store_nothing(sso, claim, value):
    sso.set_claims("rita.sso", **{claim: value})
    client = Client()
    refused = sso_login(client, "rita.sso")
    assert 400 <= refused.status_code < 500, refused.content[:500]
    nothing_stored(client)


WRONG_TYPES = [("a number", 12), ("an object", {"a": 1}), ("a list", ["a", "b"]), ("null", None)]


@pytest.mark.parametrize("claim", ["email", "email_verified", "name", "groups"])
@pytest.mark.parametrize(("name", "value"), WRONG_TYPES)
def test_claims_of_the_wrong_type_are_never_a_500(sso, claim, name, value):
    sso.set_claims("rita.sso", **{claim: value})
    client = Client()
    answer = sso_login(client, "rita.sso")
    assert answer.status_code < 500, answer.content[:500]
    if answer.status_code == 302:  # signed in: nothing odd was stored
        rita = User.objects.get()
        assert rita.email in ("", "rita@example.com")


@pytest.mark.parametrize("field", ["code", "state"])
@pytest.mark.parametrize(
    ("name", "value"),
    text_values()
    + [(n, raw.decode("utf-8", "replace")) for n, raw in json_bodies() if len(raw) < 100_000],
)
def test_a_callback_with_a_malformed_query_is_refused(sso, field, name, value):
    client = Client()
    client.get("/sso/login/")
    state = next(iter(client.session["oidc_states"]))
    query = {"code": "made-up", "state": state, field: value}
    # As a browser sends it: UTF-8, a lone surrogate as its (invalid) three bytes.
    refused = client.get(f"/sso/callback/?{urlencode(query, errors='surrogatepass')}")
    assert 400 <= refused.status_code < 500, (name, refused.content[:500])
    nothing_stored(client)


@pytest.mark.parametrize(("name", "raw"), json_bodies())
def test_a_callback_with_a_malformed_body_is_refused(sso, name, raw):
    client = Client()
    client.get("/sso/login/")
    for content_type in ("application/json", "application/x-www-form-urlencoded"):
        refused = client.post("/sso/callback/", data=raw, content_type=content_type)
        assert 400 <= refused.status_code < 500, (name, refused.content[:500])
    raw_query = client.generic("GET", "/sso/callback/?code=%FF%FE&state=%00%ED%A0%80")
    assert 400 <= raw_query.status_code < 500
    nothing_stored(client)


def test_a_callback_with_a_ten_megabyte_query_is_refused(sso):
    client = Client()
    client.get("/sso/login/")
    refused = client.get("/sso/callback/", {"code": "x" * (10 * 1024 * 1024), "state": "s"})
    assert 400 <= refused.status_code < 500
    nothing_stored(client)


def test_state_is_not_json_so_a_deep_one_is_just_wrong(sso):
    client = Client()
    client.get("/sso/login/")
    deep = json.dumps(json.loads("[" * 500 + "]" * 500))
    assert client.get("/sso/callback/", {"code": "c", "state": deep}).status_code == 400
    nothing_stored(client)
