"""The embedded server's channel layer (in memory, one process): a message for groups
nobody is in is dropped where it is published, without a hop to the server's loop, and
who listens is read on the calling thread."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.layers import channel_layers, get_channel_layer

from hitl.core.live import events, listeners
from hitl.core.live.publisher import publisher


@pytest.fixture
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.pop("default", None)
    yield get_channel_layer()
    channel_layers.backends.pop("default", None)


@pytest.fixture
def handed_to_loop(monkeypatch):
    """The messages handed to the publisher's loop, with the groups they go to."""
    sent: list[tuple[tuple[str, ...], dict]] = []
    real = publisher.send

    def send(groups, message, **kwargs):
        sent.append((tuple(groups), message))
        real(groups, message, **kwargs)

    monkeypatch.setattr(publisher, "send", send)
    return sent


def test_a_message_for_groups_nobody_is_in_goes_nowhere(memory_layer, handed_to_loop):
    thread_id = uuid.uuid4()
    events.publish_thread_changed(thread_id=thread_id, status="done", requester_id=7)
    events.publish_interrupt_changed(
        thread_id=thread_id, interrupt_id=uuid.uuid4(), reviewer_group_id=None, status="expired"
    )
    assert handed_to_loop == []


def test_a_member_gets_the_message_and_only_its_group_is_sent_to(memory_layer, handed_to_loop):
    thread_id = uuid.uuid4()
    channel = async_to_sync(memory_layer.new_channel)()
    async_to_sync(memory_layer.group_add)(listeners.thread_status_group(thread_id), channel)

    events.publish_thread_changed(thread_id=thread_id, status="done", requester_id=7)

    assert [groups for groups, _ in handed_to_loop] == [
        (listeners.thread_status_group(thread_id),),
    ]
    publisher.flush()
    message = async_to_sync(memory_layer.receive)(channel)
    assert (message["type"], message["thread_id"], message["status"]) == (
        "thread.changed",
        str(thread_id),
        "done",
    )


def test_who_listens_is_read_without_asking_the_loop(memory_layer, monkeypatch):
    def no_round_trip(*args, **kwargs):
        raise AssertionError("asked the publisher's loop")

    monkeypatch.setattr(publisher, "ask", no_round_trip)
    group = listeners.thread_group(uuid.uuid4())
    assert listeners.groups_listened([group]) is False
    channel = async_to_sync(memory_layer.new_channel)()
    async_to_sync(memory_layer.group_add)(group, channel)
    assert listeners.groups_listened(["inbox.all", group]) is True
