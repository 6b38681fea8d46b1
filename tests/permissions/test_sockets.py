"""The permission table (docs/permissions.md) on the WebSockets: the thread socket opens exactly for
those who may view the thread (`view a thread`), and the inbox socket pushes a new
pending interrupt exactly to those who find it in their inbox (`find its pending
interrupt`). Through the real ASGI app and the Redis channel layer."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers

from hitl.core.live.events import publish_interrupt_snoozed
from tests.permissions.matrix import ROLES, expected
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_consumers import socket

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SENTINEL = "sentinel"  # an item set aside after the push: the socket hears it last


@pytest.fixture(autouse=True)
def fresh_layer():
    # Each test runs its own event loop; a layer bound to an earlier loop cannot serve it.
    channel_layers.backends.pop("default", None)
    yield
    channel_layers.backends.pop("default", None)


async def opened(path: str, user) -> tuple[str, object]:
    """The cell a socket's handshake gives, and the socket when it opened."""
    ws = await socket(path, user)
    connected, code = await ws.connect(timeout=5)
    if not connected:
        return {4401: "login", 4403: "404"}.get(code, f"closed with {code}"), None
    assert await ws.receive_json_from(timeout=5) == {"type": "hello"}
    return "yes", ws


async def pushed(ws, user, interrupt_id: str) -> bool:
    """Whether the pending interrupt reached the socket before a message published after
    it to this reviewer alone (one set aside: every open inbox socket of theirs hears it)."""
    await sync_to_async(publish_interrupt_snoozed)(
        user_id=user.pk, interrupt_id=SENTINEL, snoozed=False
    )
    seen = False
    while True:
        message = await ws.receive_json_from(timeout=30)
        if message.get("interrupt_id") == interrupt_id and message["type"] == "interrupt.changed":
            seen = message["status"] == "pending"
        elif message.get("interrupt_id") == SENTINEL:
            return seen


@pytest.mark.parametrize("role", ROLES.values())
def test_the_thread_socket_opens_for_viewers_only(role, world_for):
    world = world_for(role)

    async def scenario() -> str:
        cell, ws = await opened(f"/ws/threads/{world.paused.pk}/", world.user)
        if ws is not None:
            await ws.disconnect()
        return cell

    assert asyncio.run(scenario()) == expected("view", role)


@pytest.mark.parametrize("role", ROLES.values())
def test_the_inbox_socket_pushes_the_interrupt_to_its_reviewers_only(role, world_for):
    world = world_for(role)

    async def scenario() -> str:
        cell, ws = await opened("/ws/inbox/", world.user)
        if ws is None:
            return cell
        _, (row,) = await sync_to_async(open_interrupts)(
            user=world.requester, values=[human_interrupt("pay_invoice")], title="pushed"
        )
        cell = "yes" if await pushed(ws, world.user, str(row.pk)) else "no"
        await ws.disconnect()
        return cell

    assert asyncio.run(scenario()) == expected("list_interrupt", role)
