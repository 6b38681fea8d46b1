"""New input, or a state update, on a paused thread supersedes its pending interrupts as
LangGraph Server does: withdrawn live, audited, never answered afterwards."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from hitl.core.live import listeners
from hitl.core.models import AuditEvent, HumanInterrupt, Run
from tests.api.conftest import sdk_client, token_for
from tests.api.test_inbox_clients import CLIENT_ENV, client_stack, stack16  # noqa: F401

pytestmark = pytest.mark.postgres


class Listener:
    """What an open page hears: a channel in the thread's group and in every inbox's."""

    def __init__(self, thread_id: str):
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        for group in (listeners.thread_group(thread_id), listeners.INBOX_ALL):
            async_to_sync(self.layer.group_add)(group, self.channel)

    def withdrawn(self, interrupt_id: str, timeout: float = 20) -> dict:
        async def receive() -> dict:
            while True:
                message = await asyncio.wait_for(self.layer.receive(self.channel), timeout)
                if (
                    message.get("type") == "interrupt.changed"
                    and message.get("interrupt_id") == interrupt_id
                    and message.get("status") == "cancelled"
                ):
                    return message

        return async_to_sync(receive)()


def _superseded(row: HumanInterrupt) -> bool:
    return AuditEvent.objects.filter(
        kind=AuditEvent.Kind.INTERRUPT_CANCELLED,
        interrupt_id=row.pk,
        data__reason="superseded by new input",
    ).exists()


def test_new_input_on_a_paused_thread_supersedes_its_interrupts(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    old = HumanInterrupt.objects.get(thread_id=thread_id)
    page = Listener(thread_id)

    # Typing a message instead of clicking the interrupt card: a new run, not a 409.
    again = client.runs.wait(thread_id, "typed_email", input={"request": "q4"})
    assert again["__interrupt__"][0]["value"]["action_request"]["action"] == "send_email"
    assert page.withdrawn(str(old.pk))["thread_id"] == thread_id
    old.refresh_from_db()
    assert old.status == HumanInterrupt.Status.CANCELLED and _superseded(old)
    new = HumanInterrupt.objects.get(thread_id=thread_id, status="pending")
    assert new.pk != old.pk
    assert Run.objects.filter(thread_id=thread_id, kind="start").count() == 2

    # The withdrawn request is never answered afterwards; the new one is.
    refused = httpx.post(
        f"{stack16.base_url}/api/v1/interrupts/{old.pk}/decision",
        json={"type": "accept"},
        headers={"x-api-key": token_for(reviewer)},
    )
    assert refused.status_code == 409, refused.text
    old.refresh_from_db()
    assert old.status == HumanInterrupt.Status.CANCELLED and old.responded_by is None
    done = client.runs.wait(thread_id, "typed_email", command={"resume": {"type": "accept"}})
    assert done["request"] == "q4" and done["sent"]["to"] == "ops@example.com"


def test_update_state_on_a_paused_thread_supersedes_its_interrupts(stack16, reviewer):  # noqa: F811
    client = sdk_client(stack16.base_url, reviewer)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "typed_email", input={"request": "q3"})
    old = HumanInterrupt.objects.get(thread_id=thread_id)
    page = Listener(thread_id)

    client.threads.update_state(thread_id, {"request": "edited"})
    assert page.withdrawn(str(old.pk))["status"] == "cancelled"
    old.refresh_from_db()
    assert old.status == HumanInterrupt.Status.CANCELLED and _superseded(old)
    assert client.threads.get(thread_id)["status"] == "idle"
    assert client.threads.get_state(thread_id)["values"]["request"] == "edited"
