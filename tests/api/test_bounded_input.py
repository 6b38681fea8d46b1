"""Every JSON body, query string, form and socket message goes through one bounded checker.

NUL characters, lone UTF-16 surrogates and deep nesting get a 400 naming the field, on
SQLite as on PostgreSQL (this module runs on both), and change nothing. In-process:
Django's test client and Channels' WebsocketCommunicator, no server needed.
"""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from hitl.core.errors import MAX_JSON_DEPTH
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from tests.api.conftest import token_for

DEEP = "[" * 600 + "]" * 600  # a 1.2 KB value nested 600 levels
VERY_DEEP = "[" * 100_000 + "]" * 100_000  # deeper than Python's recursion limit


def post(user, path: str, body: str):
    return Client().post(
        path, body, content_type="application/json", HTTP_X_API_KEY=token_for(user)
    )


def agui_body(**fields) -> str:
    body = {"threadId": str(uuid.uuid4()), "runId": "r1", "messages": [], "state": {}}
    body.update(fields)
    return json.dumps(body)


# (path, a body with `{value}` where a client-chosen JSON value goes, the field's name)
WRITES = [
    (
        "/api/v1/threads",
        '{{"graph": "approval", "input": {{"request": {value}}}}}',
        "input.request",
    ),
    ("/langgraph/threads", '{{"metadata": {{"note": {value}}}}}', "metadata.note"),
    ("/langgraph/runs", '{{"assistant_id": "approval", "input": {{"r": {value}}}}}', "input.r"),
    (
        "/langgraph/threads/search",
        '{{"metadata": {{"k": {value}}}, "limit": 5}}',
        "metadata.k",
    ),
    ("/agui/approval", None, "state.request"),
]


def body_for(template: str | None, value: str) -> str:
    if template is None:  # AG-UI: a RunAgentInput whose state carries the value
        return agui_body().replace('"state": {}', f'"state": {{"request": {value}}}')
    return template.format(value=value)


def assert_refused(response, *words: str) -> str:
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/json")
    detail = response.json()["detail"]
    for word in words:
        assert word in detail, detail
    return detail


@pytest.mark.parametrize(("path", "template", "field"), WRITES)
def test_deep_nesting_is_a_400_on_every_json_write(reviewer, path, template, field):
    before = (Thread.objects.count(), Run.objects.count())
    for deep in (DEEP, VERY_DEEP):
        response = post(reviewer, path, body_for(template, deep))
        detail = assert_refused(response, "nested too deeply", str(MAX_JSON_DEPTH))
        assert detail.startswith("body")
    assert (Thread.objects.count(), Run.objects.count()) == before


@pytest.mark.parametrize(("path", "template", "field"), WRITES)
def test_a_lone_surrogate_is_a_400_naming_the_field(reviewer, path, template, field):
    before = (Thread.objects.count(), Run.objects.count())
    response = post(reviewer, path, body_for(template, '"a\\ud800b"'))
    assert_refused(response, f"body.{field}", "surrogate")
    assert (Thread.objects.count(), Run.objects.count()) == before


@pytest.mark.parametrize(("path", "template", "field"), WRITES)
def test_a_nul_is_a_400_naming_the_field(reviewer, path, template, field):
    before = (Thread.objects.count(), Run.objects.count())
    response = post(reviewer, path, body_for(template, '["ok", "a\\u0000b"]'))
    assert_refused(response, f"body.{field}[1]", "NUL")
    assert (Thread.objects.count(), Run.objects.count()) == before


def test_a_bad_key_is_named_too(reviewer):
    response = post(reviewer, "/api/v1/threads", '{"graph": "approval", "input": {"\\udfff": 1}}')
    assert_refused(response, "body.input", "key", "surrogate")


def test_a_body_that_is_not_json_says_so(reviewer):
    response = post(reviewer, "/langgraph/threads", '{"metadata": ')
    assert_refused(response, "not valid JSON")
    response = Client().post(
        "/api/v1/threads",
        b'{"graph": "\xff"}',
        content_type="application/json",
        HTTP_X_API_KEY=token_for(reviewer),
    )
    assert_refused(response, "UTF-8")


def test_nesting_up_to_the_limit_is_accepted(reviewer, manual_runs):
    nested = "[" * (MAX_JSON_DEPTH - 2) + "1" + "]" * (MAX_JSON_DEPTH - 2)
    response = post(reviewer, "/api/v1/threads", body_for(WRITES[0][1], nested))
    assert response.status_code == 201, response.content
    assert Thread.objects.get(pk=response.json()["thread_id"]).runs.get().input["request"]


def test_a_surrogate_in_a_decision_records_nothing(reviewer, requester, manual_runs):
    started = post(requester, "/api/v1/threads", '{"graph": "approval", "input": {}}').json()
    manual_runs(started["run_id"])
    row = HumanInterrupt.objects.get(thread_id=started["thread_id"])
    response = post(
        reviewer,
        f"/api/v1/interrupts/{row.pk}/decision",
        '{"type": "response", "args": "fine \\ud83d"}',
    )
    assert_refused(response, "body.args", "surrogate")
    row.refresh_from_db()
    assert row.status == HumanInterrupt.Status.PENDING
    assert not AuditEvent.objects.filter(thread_id=row.thread_id, kind="interrupt.answered")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/interrupts?status=%00",
        "/langgraph/threads/00000000-0000-0000-0000-000000000001/history?before=%00",
        "/api/v1/interrupts?a%00b=1",
    ],
)
def test_a_nul_in_a_query_parameter_is_a_json_400(reviewer, path):
    response = Client().get(path, HTTP_X_API_KEY=token_for(reviewer))
    assert_refused(response, "query parameter", "NUL")


def test_a_nul_in_a_page_query_or_form_is_a_400(reviewer):
    client = Client()
    client.force_login(reviewer)
    page = client.get("/?tab=%00&graph=x")
    assert page.status_code == 400
    assert "query parameter tab" in page.content.decode()
    login = Client().post(
        "/login/", "username=rita%00&password=x", content_type="application/x-www-form-urlencoded"
    )
    assert login.status_code == 400
    assert "form field username" in login.content.decode()


def test_an_unexpected_failure_is_a_json_500_on_every_api(reviewer, monkeypatch):
    """A bug is still a bug, but the client gets {"detail"} it can parse, never HTML."""
    from hitl.api import agui, v1
    from hitl.api.langgraph import threads as lg

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(v1, "interrupt_list_for_reviewer", broken)
    monkeypatch.setattr(lg, "thread_list_for_user", broken)
    monkeypatch.setattr(agui, "start_run", broken)
    client = Client(raise_request_exception=False)
    key = {"HTTP_X_API_KEY": token_for(reviewer)}
    answers = [
        client.get("/api/v1/interrupts", **key),
        client.post("/langgraph/threads/search", "{}", content_type="application/json", **key),
        client.post("/agui/approval", agui_body(), content_type="application/json", **key),
    ]
    for response in answers:
        assert response.status_code == 500
        assert response["Content-Type"].startswith("application/json")
        assert response.json() == {"detail": "Internal server error; it has been logged."}


# --- sockets ----------------------------------------------------------------------


@pytest.fixture
def memory_layer(settings):
    """A fresh in-memory channel layer: this test needs no Redis, so it runs embedded too."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.pop("default", None)
    yield
    channel_layers.backends.pop("default", None)


def test_a_bad_socket_message_gets_an_error_and_the_socket_stays(reviewer, memory_layer):
    from hitl.asgi import application

    client = Client()
    client.force_login(reviewer)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://127.0.0.1"), (b"cookie", cookie)]

    async def scenario():
        communicator = WebsocketCommunicator(application, "/ws/inbox/", headers=headers)
        connected, _ = await communicator.connect()
        assert connected
        assert (await communicator.receive_json_from(timeout=5))["type"] == "hello"
        replies = []
        for text in ("{not json", DEEP, '{"type": "ping", "x": "\\u0000"}', "x" * 5000):
            await communicator.send_to(text_data=text)
            replies.append(await communicator.receive_json_from(timeout=5))
        await communicator.send_to(bytes_data=b"\x00")
        replies.append(await communicator.receive_json_from(timeout=5))
        await communicator.send_json_to({"type": "ping"})
        pong = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return replies, pong

    replies, pong = async_to_sync(scenario)()
    assert [r["type"] for r in replies] == ["error"] * 5
    assert "not valid JSON" in replies[0]["detail"]
    assert "nested too deeply" in replies[1]["detail"]
    assert "message.x" in replies[2]["detail"] and "NUL" in replies[2]["detail"]
    assert "at most" in replies[3]["detail"]
    assert "text frames" in replies[4]["detail"]
    assert pong == {"type": "pong"}
