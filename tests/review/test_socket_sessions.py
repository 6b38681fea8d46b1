"""Sockets check the session they were opened with (issue 27, item 9): on logout, on
session expiry and on a password change, every socket of that session closes with 4401
within seconds, and no push reaches it after that. Another session of the same user
keeps its sockets. Through the real ASGI app and the Redis channel layer."""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# "Within seconds": what a socket may take to notice an expired session.
NOTICE = 6.0


@pytest.fixture(autouse=True)
def redis_layer(settings):
    settings.HITL_EXECUTOR = "manual"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": settings.REDIS_URL, "socket_timeout": 30}]},
        }
    }
    channel_layers.backends.pop("default", None)
    yield
    channel_layers.backends.pop("default", None)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def connect(path: str, client: Client) -> WebsocketCommunicator:
    from hitl.asgi import application

    cookie = client.cookies["sessionid"].value
    ws = WebsocketCommunicator(
        application,
        path,
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await ws.connect(timeout=5)
    assert connected, path
    assert await ws.receive_json_from(timeout=5) == {"type": "hello"}
    return ws


async def closed_with(ws: WebsocketCommunicator, timeout: float = NOTICE) -> int | None:
    """The close code the socket receives next, skipping pushes before it."""
    while True:
        output = await ws.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return output.get("code")


async def sockets_of(client: Client, thread) -> list[WebsocketCommunicator]:
    return [await connect("/ws/inbox/", client), await connect(f"/ws/threads/{thread.pk}/", client)]


async def scenario(reviewer, requester, end_session) -> None:
    thread, _ = await sync_to_async(open_interrupts)(user=requester, values=[human_interrupt()])
    tab = await sync_to_async(signed_in)(reviewer)
    other_device = await sync_to_async(signed_in)(reviewer)
    ended = await sockets_of(tab, thread)
    kept = await connect("/ws/inbox/", other_device)

    ends_all_sessions = await end_session(tab)

    for ws in ended:
        assert await closed_with(ws) == 4401
    # A new pending item after that reaches no socket of the ended session.
    _, (row,) = await sync_to_async(open_interrupts)(user=requester, values=[human_interrupt()])
    if ends_all_sessions:
        assert await closed_with(kept) == 4401
    else:
        message = await kept.receive_json_from(timeout=5)
        assert message["interrupt_id"] == str(row.pk)
        await kept.disconnect()
    for ws in ended:
        assert await ws.receive_nothing(timeout=0.5)


def test_logging_out_closes_every_socket_of_that_session(reviewer, requester):
    async def log_out(tab: Client) -> bool:
        response = await sync_to_async(tab.post)("/logout/")
        assert response.status_code == 302
        return False

    asyncio.run(scenario(reviewer, requester, log_out))


def test_an_expired_session_closes_its_sockets(reviewer, requester):
    async def expire(tab: Client) -> bool:
        key = tab.cookies["sessionid"].value
        past = timezone.now() - timedelta(seconds=1)
        updated = await sync_to_async(Session.objects.filter(session_key=key).update)(
            expire_date=past
        )
        assert updated == 1
        return False

    asyncio.run(scenario(reviewer, requester, expire))


def test_a_password_change_closes_the_sockets_of_every_session(reviewer, requester):
    async def change_password(tab: Client) -> bool:
        def change():
            reviewer.set_password("a-new-password-for-rita")
            reviewer.save()

        await sync_to_async(change)()
        return True  # every session signed in with the old password ends

    asyncio.run(scenario(reviewer, requester, change_password))


def test_a_password_changed_inside_a_running_loop_still_tells_the_sockets(
    reviewer, requester, monkeypatch
):
    """A save from a thread that runs an event loop (a sync call made inside one, as
    Playwright's sync API does) cannot use async_to_sync: the notice goes from that loop."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    async def change_password(tab: Client) -> bool:
        reviewer.set_password("a-new-password-for-rita")
        reviewer.save()
        return True

    errors = logging.handlers.BufferingHandler(capacity=100)
    errors.setLevel(logging.ERROR)
    logger = logging.getLogger("hitl.review.socket_sessions")
    logger.addHandler(errors)  # on the logger: django.setup() may replace the root's
    try:
        asyncio.run(scenario(reviewer, requester, change_password))
    finally:
        logger.removeHandler(errors)
    assert [r.getMessage() for r in errors.buffer] == []


def test_a_socket_without_a_session_is_refused(reviewer):
    async def run():
        from hitl.asgi import application

        ws = WebsocketCommunicator(
            application, "/ws/inbox/", headers=[(b"origin", b"http://127.0.0.1")]
        )
        assert await ws.connect(timeout=5) == (False, 4401)

    asyncio.run(run())
