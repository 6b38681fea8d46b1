"""Live sockets through the real ASGI app and the Redis channel layer: authentication on
connect, permission per event, server-rendered fragments in the messages."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.test import Client

from hitl.core import decisions
from hitl.core.worker import lease, pauses_record
from hitl.review import socket_principals
from tests.review.conftest import dangerous_markup, human_interrupt, open_interrupts

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


LAYERS = {
    "redis": "channels_redis.core.RedisChannelLayer",
    "redis-pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}


@pytest.fixture(autouse=True, params=sorted(LAYERS))
def fresh_layer(request, settings):
    """Each test on both Redis layers (HITL_CHANNEL_LAYER), with a fresh layer per test:
    each test runs its own event loop."""
    settings.HITL_EXECUTOR = "manual"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": LAYERS[request.param],
            "CONFIG": {"hosts": [{"address": settings.REDIS_URL, "socket_timeout": 30}]},
        }
    }
    channel_layers.backends.pop("default", None)
    yield request.param
    channel_layers.backends.pop("default", None)


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def socket(path: str, user=None) -> WebsocketCommunicator:
    """A browser-like socket: same-origin, with the user's session cookie."""
    from hitl.asgi import application

    headers = [(b"origin", b"http://127.0.0.1")]
    if user is not None:
        cookie = await sync_to_async(session_cookie)(user)
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def connect(path: str, user=None) -> WebsocketCommunicator:
    ws = await socket(path, user)
    connected, _ = await ws.connect(timeout=5)
    assert connected, path
    assert await ws.receive_json_from(timeout=5) == {"type": "hello"}
    return ws


async def pause(**kwargs):
    return await sync_to_async(open_interrupts)(**kwargs)


async def next_of(ws, kind: str, timeout: float = 5) -> dict:
    """The next message of `kind` (thread streams also carry other events)."""
    while True:
        message = await ws.receive_json_from(timeout=timeout)
        if message["type"] == kind:
            return message


def test_anonymous_and_outsider_sockets_are_closed(requester, outsider):
    async def scenario():
        thread, _ = await pause(user=requester, values=[human_interrupt()])
        for path, user, code in [
            ("/ws/inbox/", None, 4401),
            (f"/ws/threads/{thread.pk}/", None, 4401),
            (f"/ws/threads/{thread.pk}/", outsider, 4403),
        ]:
            ws = await socket(path, user)
            connected, close_code = await ws.connect(timeout=5)
            assert (connected, close_code) == (False, code), path
        ws = await socket(f"/ws/threads/{thread.pk}/", requester)  # the requester may watch
        assert (await ws.connect(timeout=5))[0]
        await ws.disconnect()

    asyncio.run(scenario())


def test_reviewers_get_only_their_groups_interrupts(reviewer, finance_reviewer, requester):
    async def scenario():
        rita = await connect("/ws/inbox/", reviewer)
        fiona = await connect("/ws/inbox/", finance_reviewer)

        _, (finance_row,) = await pause(
            user=requester, values=[human_interrupt("pay_invoice", reviewer_group="finance")]
        )
        message = await fiona.receive_json_from(timeout=5)
        assert message["type"] == "interrupt.changed"
        assert message["interrupt_id"] == str(finance_row.pk)
        assert message["status"] == "pending"
        assert f'id="row-{finance_row.pk}"' in message["html"]
        assert "pay_invoice" in message["html"]
        assert message["notify"]["title"] == "Approve pay_invoice"
        assert await rita.receive_nothing(timeout=0.5)

        _, (mine,) = await pause(user=requester, values=[human_interrupt("send_email")])
        message = await rita.receive_json_from(timeout=5)
        assert message["interrupt_id"] == str(mine.pk)
        assert await fiona.receive_nothing(timeout=0.5)
        for ws in (rita, fiona):
            await ws.disconnect()

    asyncio.run(scenario())


def test_answered_elsewhere_reaches_the_other_reviewer(reviewer, second_reviewer, requester):
    async def scenario():
        _, (row,) = await pause(user=requester, values=[human_interrupt()])
        sam = await connect("/ws/inbox/", second_reviewer)
        await sync_to_async(decisions.interrupt_resolve)(
            interrupt_id=row.pk, user=reviewer, response_type="accept"
        )
        message = await sam.receive_json_from(timeout=5)
        assert message["type"] == "interrupt.changed"
        assert (message["status"], message["responded_by"]) == ("resolved", "rita")
        assert "html" not in message
        await sam.disconnect()

    asyncio.run(scenario())


def test_permission_is_checked_per_event(reviewer, requester, reviewers_group, monkeypatch):
    monkeypatch.setattr(socket_principals, "PERMISSION_TTL", 0.0)

    async def scenario():
        rita = await connect("/ws/inbox/", reviewer)
        await pause(user=requester, values=[human_interrupt()])
        assert (await rita.receive_json_from(timeout=5))["type"] == "interrupt.changed"
        # Removed from the group while connected: the socket is still subscribed, but
        # the per-event check drops what is no longer routed to her.
        await sync_to_async(reviewer.groups.remove)(reviewers_group)
        await pause(user=requester, values=[human_interrupt()])
        assert await rita.receive_nothing(timeout=0.7)
        # Deactivated: the next event closes the socket.
        await sync_to_async(type(reviewer).objects.filter(pk=reviewer.pk).update)(is_active=False)
        await pause(user=requester, values=[human_interrupt()])
        output = await rita.receive_output(timeout=5)
        assert output == {"type": "websocket.close", "code": 4401}

    asyncio.run(scenario())


def test_thread_page_socket_gets_cards_sections_and_stream(reviewer, requester):
    async def scenario():
        thread, (row,) = await pause(user=requester, values=[human_interrupt()])
        watcher = await connect(f"/ws/threads/{thread.pk}/", requester)
        rita = await connect(f"/ws/threads/{thread.pk}/", reviewer)

        await sync_to_async(decisions.interrupt_resolve)(
            interrupt_id=row.pk, user=reviewer, response_type="accept"
        )
        gone = await next_of(watcher, "interrupt.changed")
        assert (gone["interrupt_id"], gone["status"]) == (str(row.pk), "resolved")
        changed = await next_of(watcher, "thread.changed")
        assert changed["status"] == "busy"
        assert set(changed["sections"]) == {
            "status", "actions", "batch", "failure", "result", "artifacts", "conversation", "runs", "audit"
        }  # fmt: skip
        assert "running" in changed["sections"]["status"]

        # A new interrupt on the thread arrives as a decision card: answerable for the
        # reviewer, read-only for the requester.
        from hitl.core.live.events import publish_thread_event

        await sync_to_async(publish_thread_event)(
            thread.pk, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hi"}
        )
        streamed = await next_of(rita, "thread.event")
        assert streamed["event"]["delta"] == "Hi"
        run = await sync_to_async(lambda: thread.runs.get(kind="resume"))()
        await sync_to_async(lease.run_lease_take)(run_id=run.pk, worker="t")
        await sync_to_async(pauses_record.run_finish)(
            run_id=run.pk,
            worker="t",
            interrupts=[("second", human_interrupt("follow_up", description="<b>x</b>"), None)],
            result=None,
        )
        for ws, answerable in ((rita, True), (watcher, False)):
            card = await next_of(ws, "interrupt.changed")
            assert card["status"] == "pending"
            assert 'class="card interrupt' in card["html"]
            assert ("<form" in card["html"]) is answerable
            assert dangerous_markup(card["html"]) == []
        for ws in (watcher, rita):
            await ws.disconnect()

    asyncio.run(scenario())


def test_requesters_inbox_follows_their_threads(requester):
    async def scenario():
        quinn = await connect("/ws/inbox/", requester)
        thread, _ = await pause(user=requester, values=[human_interrupt()])
        message = await next_of(quinn, "thread.changed")
        assert message["thread_id"] == str(thread.pk)
        assert f'id="row-{thread.pk}"' in message["html"]
        await quinn.disconnect()

    asyncio.run(scenario())


def test_the_worker_renders_inbox_rows_only_while_an_inbox_listens(
    reviewer, requester, fresh_layer
):
    from hitl.review import fragments

    def pending_message(row) -> dict:
        return {"interrupt_id": str(row.pk), "reviewer_group_id": row.reviewer_group_id}

    async def scenario():
        from channels.layers import get_channel_layer

        # Servers that earlier tests killed never left their groups: start from none.
        await get_channel_layer().flush()
        _, (row,) = await pause(user=requester, values=[human_interrupt("send_email")])
        alone = pending_message(row)
        await asyncio.to_thread(fragments.attach_inbox_row, alone)
        rita = await connect("/ws/inbox/", reviewer)
        watched = pending_message(row)
        await asyncio.to_thread(fragments.attach_inbox_row, watched)
        await rita.disconnect()
        return alone, watched

    alone, watched = asyncio.run(scenario())
    # The pubsub layer keeps no membership to ask: it renders, as before.
    assert ("html" in alone) == (fresh_layer == "redis-pubsub")
    assert "send_email" in watched["html"]
