"""Slack interactivity refuses what it cannot read with a 400 and changes nothing.

Unsigned requests with malformed headers or bodies, and requests signed exactly as Slack
signs them whose payload we cannot read (not our buttons, NUL or lone surrogates, deep
nesting, wrong types, huge): never a 500, no decision, no trace in the replay cache.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import quote_plus

import pytest
from django.test import Client

from hitl.core.models import AuditEvent, SlackMessage, SlackRequestSeen
from tests.fuzz_bodies import DEPTH, TEN_MB, deep_json, json_bodies, text_values
from tests.integrations.slack.conftest import (
    SECRET,
    button,
    form_body,
    notified,
    post_signed,
    press,
    send,
    sign,
    submit,
)

pytestmark = pytest.mark.usefixtures("slack")


@pytest.fixture
def item(django_capture_on_commit_callbacks, slack, settings, linked, requester, reviewer):
    """A pending item on rita's Slack message; (row, message). E-mail matching is on."""
    settings.HITL_SLACK_MATCH_EMAIL = True
    settings.HITL_SLACK_BOT_TOKEN = "xoxb-test"
    reviewer.email = "rita@example.com"
    reviewer.save()
    (row,), message = notified(django_capture_on_commit_callbacks, slack, requester, reviewer)
    return row, message


def untouched(row, slack) -> None:
    """No decision, no audit, no Slack call, not even where the message lives."""
    row.refresh_from_db()
    assert row.status == "pending" and row.responded_by is None
    assert (
        not AuditEvent.objects.filter(kind__startswith="interrupt.")
        .exclude(kind__in=["interrupt.created", "interrupt.opened"])
        .exists()
    ), list(AuditEvent.objects.values_list("kind", flat=True))
    assert slack.to("/api/") == []
    assert SlackMessage.objects.get().ts == ""


def signed_raw(body: bytes, at: float | None = None) -> dict[str, str]:
    """Headers Slack would send with `body` (signed over its bytes, as Slack does)."""
    timestamp = str(int(at if at is not None else time.time()))
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(SECRET.encode(), base, hashlib.sha256).hexdigest()
    return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp, "HTTP_X_SLACK_SIGNATURE": "v0=" + digest}


def post_raw(body: bytes, headers: dict[str, str]):
    return Client().post(
        "/slack/interactivity/",
        data=body,
        content_type="application/x-www-form-urlencoded",
        **headers,
    )


# --- unsigned: the headers' and the body's shape is checked before anything else -----------

BAD_TIMESTAMPS = [
    ("superscript two", "²"),
    ("arabic-indic digits", "١٧٠٠٠٠٠٠٠٠"),
    ("four hundred digits", "1" * 400),
    ("negative", "-1700000000"),
    ("spaces", " 1700000000 "),
]


@pytest.mark.parametrize(("name", "timestamp"), BAD_TIMESTAMPS)
def test_a_timestamp_that_is_not_ascii_digits_is_a_400(item, slack, name, timestamp):
    row, message = item
    body = form_body(press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA"))
    response = send(
        Client(),
        body,
        {"HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp, "HTTP_X_SLACK_SIGNATURE": "v0=" + "0" * 64},
    )
    assert response.status_code == 400, response.content[:300]
    assert "X-Slack-Request-Timestamp" in response.json()["error"]
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


def test_a_body_that_is_not_utf8_is_a_400(item, slack):
    row, _ = item
    body = b"payload=%7B%7D\xff\xfe"
    response = post_raw(body, signed_raw(body))
    assert response.status_code == 400, response.content[:300]
    assert "UTF-8" in response.json()["error"]
    unsigned = post_raw(body, {"HTTP_X_SLACK_REQUEST_TIMESTAMP": str(int(time.time()))})
    assert unsigned.status_code in (400, 401)
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


@pytest.mark.parametrize(("name", "value"), text_values())
def test_unsigned_requests_with_malformed_headers_are_refused(item, slack, name, value):
    row, message = item
    body = form_body(press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA"))
    now = str(int(time.time()))
    for headers in (
        {"HTTP_X_SLACK_REQUEST_TIMESTAMP": value, "HTTP_X_SLACK_SIGNATURE": sign(body, now)},
        {"HTTP_X_SLACK_REQUEST_TIMESTAMP": now, "HTTP_X_SLACK_SIGNATURE": value},
        {"HTTP_X_SLACK_REQUEST_TIMESTAMP": now, "HTTP_X_SLACK_SIGNATURE": "v0=" + value},
    ):
        response = send(Client(), body, headers)
        assert response.status_code in (400, 401), (name, headers, response.content[:300])
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


@pytest.mark.parametrize(("name", "raw"), json_bodies())
def test_unsigned_malformed_bodies_are_refused(item, slack, name, raw):
    row, _ = item
    now = str(int(time.time()))
    for body in (raw, b"payload=" + quote_plus(raw).encode()):
        response = post_raw(
            body,
            {"HTTP_X_SLACK_REQUEST_TIMESTAMP": now, "HTTP_X_SLACK_SIGNATURE": "v0=" + "0" * 64},
        )
        assert 400 <= response.status_code < 500, (name, response.content[:300])
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


# --- signed as Slack signs, yet unreadable ---------------------------------------------------


@pytest.mark.parametrize(("name", "raw"), json_bodies())
def test_signed_malformed_payloads_are_a_400(item, slack, name, raw):
    row, _ = item
    for body in (raw, b"payload=" + quote_plus(raw).encode()):
        if len(body) > TEN_MB and body is not raw:
            continue  # the same ten megabytes once is enough
        response = post_raw(body, signed_raw(body))
        assert response.status_code == 400, (name, response.content[:300])
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


def _set(payload: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `payload` with the dotted `path` (`actions.0.block_id`) set to `value`."""
    copy = json.loads(json.dumps(payload))
    target: Any = copy
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return copy


# The fields of a button press an attacker with the signing secret's output cannot forge,
# but that a broken or hostile client could still get signed: each must be read safely.
PRESS_FIELDS = [
    "type",
    "user.id",
    "user.team_id",
    "user.email",
    "team.id",
    "response_url",
    "trigger_id",
    "container.channel_id",
    "container.message_ts",
    "actions.0.action_id",
    "actions.0.block_id",
    "actions.0.value",
]
UNREADABLE = [("nul", "a\u0000b"), ("lone surrogate", "a\ud800b")]


@pytest.mark.parametrize("field", PRESS_FIELDS)
@pytest.mark.parametrize(("name", "value"), UNREADABLE)
def test_a_signed_press_with_nul_or_a_lone_surrogate_is_a_400(item, slack, field, name, value):
    row, message = item
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    response, _ = post_signed(Client(), _set(payload, field, value))
    assert response.status_code == 400, response.content[:300]
    assert "payload" in response.json()["error"]
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


WRONG_TYPES = [
    ("a list", [1, 2]),
    ("an object", {"a": {"b": 1}}),
    ("a number", 12),
    ("a huge number", 10**30),
    ("a float", 1.5),
    ("true", True),
    ("null", None),
    ("very long", "x" * 100_000),
    ("deep", json.loads(deep_json(50))),
    ("path traversal", "../../etc/passwd"),
    ("non-ascii digits", "²³"),
]


@pytest.mark.parametrize("field", PRESS_FIELDS)
@pytest.mark.parametrize(("name", "value"), WRONG_TYPES)
def test_a_signed_press_with_wrong_types_is_never_a_500_and_decides_nothing(
    item, slack, field, name, value
):
    row, message = item
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    payload["user"].pop("email", None)
    response, _ = post_signed(Client(), _set(payload, field, value))
    assert response.status_code < 500, response.content[:300]
    if field.startswith(("actions.", "type")) and field != "actions.0.value":
        # Not one of our buttons, or not a press at all: nothing is decided.
        row.refresh_from_db()
        assert row.status == "pending" and row.responded_by is None


@pytest.mark.parametrize(
    "block_id",
    [
        "hitl:abc:{id}",
        "hitl:1:not-a-uuid",
        "hitl:99999999999999999999999:{id}",
        "hitl::{id}",
        "x:1:{id}",
    ],
)
def test_a_signed_press_on_a_button_that_is_not_ours_is_a_400(item, slack, block_id):
    row, message = item
    pressed = button(message, "hitl_accept", row.pk)
    value = pressed["value"]
    if "not-a-uuid" in block_id:
        value = "not-a-uuid"
    payload = press(
        slack,
        message,
        {**pressed, "block_id": block_id.format(id=row.pk), "value": value},
        "U0RITA",
    )
    response, _ = post_signed(Client(), payload)
    assert response.status_code == 400, response.content[:300]
    assert "button" in response.json()["error"]
    untouched(row, slack)
    assert SlackRequestSeen.objects.count() == 0


def test_a_signed_payload_nested_twenty_thousand_deep_is_a_400(item, slack):
    row, message = item
    payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
    text = json.dumps(payload)[:-1] + ', "deep": ' + deep_json(DEPTH) + "}"
    body = "payload=" + quote_plus(text)
    response = post_raw(body.encode(), signed_raw(body.encode()))
    assert response.status_code == 400, response.content[:300]
    assert "deep" in response.json()["error"]
    untouched(row, slack)


SUBMIT_FIELDS = ["view.private_metadata", "view.state.values.answer.text.value", "user.id"]


@pytest.mark.parametrize("field", SUBMIT_FIELDS)
@pytest.mark.parametrize(("name", "value"), UNREADABLE + WRONG_TYPES)
def test_a_signed_form_submission_that_cannot_be_read_changes_nothing(
    item, slack, field, name, value
):
    row, message = item
    view = {
        "callback_id": "hitl_respond",
        "private_metadata": json.dumps({"n": "1", "i": str(row.pk), "r": ""}),
    }
    payload = _set(submit(view, "U0RITA", "Use the EU account"), field, value)
    response, _ = post_signed(Client(), payload)
    assert response.status_code < 500, response.content[:300]
    if name in ("nul", "lone surrogate"):
        assert response.status_code == 400
    row.refresh_from_db()
    if (
        field.endswith("text.value")
        and isinstance(value, str)
        and name not in ("nul", "lone surrogate")
    ):
        return  # any other text is an answer: typed in the form, it counts
    assert row.status == "pending" and row.responded_by is None


@pytest.mark.parametrize(
    "metadata",
    [
        "not json",
        "[1]",
        json.dumps({"i": [1]}),
        json.dumps({"i": {"a": 1}}),
        json.dumps({"i": "a\u0000b"}),
        json.dumps({"i": 12}),
        deep_json(DEPTH),
    ],
)
def test_a_signed_form_submission_with_unreadable_metadata_is_refused(item, slack, metadata):
    row, _ = item
    view = {"callback_id": "hitl_respond", "private_metadata": metadata}
    response, _ = post_signed(Client(), submit(view, "U0RITA", "Use the EU account"))
    assert 400 <= response.status_code < 500 or response.json().get("response_action") == "errors"
    row.refresh_from_db()
    assert row.status == "pending" and row.responded_by is None
