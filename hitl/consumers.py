"""WebSocket consumers: authenticate on connect, re-check permission on every event."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from hitl import events
from hitl.models import HumanInterrupt, Thread
from hitl.selectors import user_can_review_all, user_can_view_thread, user_group_ids


class ThreadConsumer(AsyncJsonWebsocketConsumer):
    """Streams one thread's AG-UI events and interrupt changes."""

    async def connect(self):
        user = self.scope.get("user")
        self.thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        if user is None or not user.is_authenticated or not await self._allowed():
            await self.close(code=4403)
            return
        self.group = events.thread_group(self.thread_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    @database_sync_to_async
    def _allowed(self) -> bool:
        thread = Thread.objects.filter(pk=self.thread_id).first()
        return thread is not None and user_can_view_thread(self.scope["user"], thread)

    async def thread_event(self, message):
        if await self._allowed():
            await self.send_json(message)

    async def interrupt_changed(self, message):
        if await self._allowed():
            await self.send_json(message)

    async def thread_changed(self, message):
        if await self._allowed():
            await self.send_json(message)


class InboxConsumer(AsyncJsonWebsocketConsumer):
    """Pushes interrupt changes routed to the reviewer's groups."""

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.groups_joined = await self._groups()
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    @database_sync_to_async
    def _groups(self) -> list[str]:
        user = self.scope["user"]
        if user_can_review_all(user):
            return [events.INBOX_ALL]
        return [events.inbox_group(group_id) for group_id in user_group_ids(user)]

    @database_sync_to_async
    def _may_see(self, message) -> bool:
        user = self.scope["user"]
        user.refresh_from_db(fields=["is_active"])
        if not user.is_active:
            return False
        if user_can_review_all(user):
            return True
        group_id = message.get("reviewer_group_id")
        if group_id is None:
            group_id = (
                HumanInterrupt.objects.filter(pk=message.get("interrupt_id"))
                .values_list("reviewer_group_id", flat=True)
                .first()
            )
        return group_id is not None and group_id in set(user.groups.values_list("id", flat=True))

    async def interrupt_changed(self, message):
        if await self._may_see(message):
            await self.send_json(message)

    async def thread_changed(self, message):
        # Thread status changes reach only review-all inboxes (they subscribe to inbox.all).
        if await self._may_see({"reviewer_group_id": -1}):
            await self.send_json(message)
