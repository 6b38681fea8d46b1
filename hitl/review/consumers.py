"""WebSocket consumers: authenticate on connect, re-check permission on every event,
and send server-rendered HTML partials to the inbox and thread pages.

Permission is evaluated for every event against the user's state in the database
(active flag, groups, review-all permission). That state is reloaded for all users
with an open socket in one batch every PERMISSION_TTL per process, so a burst of
streamed tokens or 200 reviewers receiving the same interrupt cost three queries
instead of hundreds, and a revoked reviewer stops receiving within about a second.

Each socket also checks the session it was opened with (`_SessionWatch`): a logout
closes that session's sockets at once (4401), a password change makes every socket of the
user re-check its session at once, and all sessions with an open socket are re-read
together every SESSION_TTL, so an expired one closes within seconds. A push is never
sent on a session past its expiry date.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from typing import Any, Literal, NotRequired, TypedDict

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from hitl.core.access.permissions import can_view_thread
from hitl.core.db import snapshot
from hitl.core.errors import Invalid, load_json
from hitl.core.live import listeners
from hitl.core.models import HumanInterrupt, Thread
from hitl.review import fragments, socket_principals
from hitl.review.socket_principals import Principal
from hitl.review.socket_sessions import (
    live_sessions,
    session_group,
    session_watch,
    user_sessions_group,
)

log = logging.getLogger(__name__)

RENDER_TTL = 5.0
# The browser only sends pings; anything longer is refused before it is decoded.
MAX_MESSAGE_CHARS = 4096


# --- what the browser receives -------------------------------------------------------


class ErrorMessage(TypedDict):
    type: Literal["error"]
    detail: str


class HelloMessage(TypedDict):
    type: Literal["hello"]


class InterruptMessage(TypedDict):
    """An interrupt appeared (with its HTML) or left the pending state (without)."""

    type: Literal["interrupt.changed"]
    thread_id: str
    interrupt_id: str
    status: str
    reviewer_group_id: int | None
    responded_by: NotRequired[str]
    # A pending item that changed without being new (claimed, released).
    change: NotRequired[str]
    html: NotRequired[str]
    notify: NotRequired[dict[str, str]]


class ThreadMessage(TypedDict):
    """A thread's status changed; `html` is its inbox row, `sections` its page sections."""

    type: Literal["thread.changed"]
    thread_id: str
    status: str
    html: NotRequired[str]
    sections: NotRequired[dict[str, str]]


class StreamMessage(TypedDict):
    """One AG-UI event of a running thread (text deltas, tool calls, run lifecycle)."""

    type: Literal["thread.event"]
    thread_id: str
    event: dict[str, Any]


def _interrupt_message(message: dict[str, Any]) -> InterruptMessage:
    """What a socket receives of a published interrupt change (before its HTML)."""
    out: InterruptMessage = {
        "type": "interrupt.changed",
        "thread_id": message["thread_id"],
        "interrupt_id": message["interrupt_id"],
        "status": message["status"],
        "reviewer_group_id": message.get("reviewer_group_id"),
    }
    if message.get("responded_by"):
        out["responded_by"] = message["responded_by"]
    if message.get("change"):
        out["change"] = message["change"]
    return out


def _progress_message(message: dict[str, Any]) -> dict[str, Any]:
    keys = ("type", "thread_id", "interrupt_id", "reviewer_group_id", "approvals", "required")
    out = {key: message.get(key) for key in keys}
    out["approvers"] = list(message.get("approvers") or [])
    out["edited"] = bool(message.get("edited"))
    return out


class _RenderCache:
    """Per event loop: one render per fragment shared by every socket that needs it."""

    def __init__(self) -> None:
        self.entries: dict[tuple, tuple[float, asyncio.Future]] = {}

    async def get(self, key: tuple, render) -> Any:
        now = time.monotonic()
        if len(self.entries) > 2000:
            self.entries = {k: v for k, v in self.entries.items() if now - v[0] < RENDER_TTL}
        entry = self.entries.get(key)
        if entry is None or now - entry[0] >= RENDER_TTL:
            future = asyncio.ensure_future(database_sync_to_async(render)())
            entry = self.entries[key] = (now, future)
        try:
            return await asyncio.shield(entry[1])
        except Exception:
            self.entries.pop(key, None)
            log.exception("could not render %s", key)
            return None


_render_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Serialized inbox messages, shared by all sockets of this process (same text for all).
_encoded: dict[tuple, str] = {}


def renders() -> _RenderCache:
    loop = asyncio.get_running_loop()
    cache = _render_caches.get(loop)
    if cache is None:
        cache = _render_caches[loop] = _RenderCache()
    return cache


# --- fragments (sync, run in the database thread) -----------------------------------


def _interrupt_row(interrupt_id: str):
    return (
        HumanInterrupt.objects.filter(pk=interrupt_id)
        .select_related("thread", "reviewer_group")
        .first()
    )


def render_inbox_interrupt(interrupt_id: str) -> dict[str, Any] | None:
    return fragments.inbox_interrupt_fragment(interrupt_id)


def render_interrupt_card(interrupt_id: str, can_answer: bool) -> str | None:
    row = _interrupt_row(interrupt_id)
    if row is None or row.status != "pending":
        return None
    return fragments.interrupt_card(row, can_answer=can_answer)


def render_thread_row(thread_id: str) -> str | None:
    thread = (
        Thread.objects.select_related("reviewer_group", "requester")
        .filter(pk=thread_id)
        .one_or_none()
    )
    return fragments.inbox_thread_row(thread) if thread else None


# --- consumers -------------------------------------------------------------------------


class _LiveConsumer(AsyncJsonWebsocketConsumer):
    """Shared bits: the authenticated user, their principal, the hello on connect."""

    groups_joined: list[str]

    def _user_id(self) -> int | None:
        user = self.scope.get("user")
        return user.pk if user is not None and user.is_authenticated else None

    async def _principal(self) -> Principal:
        return await socket_principals.principals().get(self.user_id)

    def _session_key(self) -> str | None:
        session = self.scope.get("session")
        return getattr(session, "session_key", None) if session is not None else None

    async def _session_live(self) -> float | None:
        """The expiry of the session this socket opens with, if it is still signed in."""
        key = self._session_key()
        if key is None:
            return None
        live = await database_sync_to_async(live_sessions)({key: self.user_id})
        return live.get(key)

    async def _join(self, groups: list[str], principal: Principal) -> None:
        expires = await self._session_live()
        if expires is None:
            await self.close(code=4401)
            return
        self.session_key = self._session_key()
        groups = [*groups, session_group(self.session_key), user_sessions_group(self.user_id)]
        self.groups_joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        socket_principals.principals().add(self.user_id, principal)
        self._counted = True
        session_watch().add(self.session_key, self.user_id, self.channel_name, expires)
        await self.accept()
        await self.send_json(HelloMessage(type="hello"))

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        if getattr(self, "_counted", False):
            socket_principals.principals().remove(self.user_id)
            session_watch().remove(self.session_key, self.channel_name)

    async def session_ended(self, message):
        """Logged out, expired, or signed in with a password that changed since."""
        if not getattr(self, "_ended", False):  # told by the logout and the re-check
            self._ended = True
            await self.close(code=4401)

    async def session_check(self, message):
        """The user changed (a new password, say): is this socket's session still good?"""
        await session_watch().check([self.session_key])

    async def _send_shared(self, key: tuple, message: dict[str, Any]) -> None:
        """Send a message that is the same for every recipient, serialized once per process."""
        text = _encoded.get(key)
        if text is None:
            if len(_encoded) > 500:
                _encoded.clear()
            text = _encoded[key] = json.dumps(message)
        await self.send(text_data=text)

    async def _still_active(self, principal: Principal) -> bool:
        if getattr(self, "_ended", False):
            return False
        if not principal.active:
            await self.close(code=4401)
            return False
        watch = session_watch()
        if watch.expired(self.session_key) and await watch.check([self.session_key]):
            await self.session_ended({})
            return False
        return True

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        # Every message is decoded bounded and checked: a bad one gets an error message,
        # never a crashed consumer (a 1011 close the browser would retry forever).
        try:
            if text_data is None:
                raise Invalid("Send JSON text frames.")
            if len(text_data) > MAX_MESSAGE_CHARS:
                raise Invalid(f"A message is at most {MAX_MESSAGE_CHARS} characters.")
            content = load_json(text_data, "message")
        except Invalid as exc:
            await self.send_json(ErrorMessage(type="error", detail=exc.message))
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content, **kwargs):
        # The browser only listens; a ping keeps proxies from closing an idle socket.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})


class InboxConsumer(_LiveConsumer):
    """Pushes interrupts routed to the reviewer's groups, and their own threads' changes."""

    async def connect(self):
        self.user_id = self._user_id()
        if self.user_id is None:
            await self.close(code=4401)
            return
        principal = (
            await database_sync_to_async(socket_principals.load_principals)([self.user_id])
        ).get(self.user_id, socket_principals.NOBODY)
        if not principal.active:
            await self.close(code=4401)
            return
        if principal.review_all:
            groups = [listeners.INBOX_ALL]
        else:
            groups = [listeners.inbox_group(g) for g in sorted(principal.group_ids)]
            groups.append(listeners.user_group(self.user_id))
        groups.append(listeners.own_inbox_group(self.user_id))
        await self._join(groups, principal)

    async def interrupt_changed(self, message):
        principal = await self._principal()
        if not await self._still_active(principal):
            return
        group_id = message.get("reviewer_group_id")
        if not socket_principals.may_review(principal, group_id):
            return
        out = _interrupt_message(message)
        if message["status"] == "pending":
            # Usually attached by the publishing process (review.apps); else render it here, once.
            rendered = message if message.get("html") else None
            if rendered is None:
                interrupt_id = message["interrupt_id"]
                rendered = await renders().get(
                    ("inbox-row", interrupt_id, group_id),
                    lambda: render_inbox_interrupt(interrupt_id),
                )
            if rendered is None:
                return  # answered or gone before we got here; its own event follows
            out["html"], out["notify"] = rendered["html"], rendered["notify"]
        # The row is part of the key: a claim re-renders a row pushed before.
        key = (
            "inbox",
            out["interrupt_id"],
            out["status"],
            group_id,
            out.get("responded_by"),
            out.get("change"),
            out.get("html"),
        )
        await self._send_shared(key, dict(out))

    async def interrupt_progress(self, message):
        """A four-eyes approval arrived ("1 of 2"); the item stays pending."""
        principal = await self._principal()
        if not await self._still_active(principal):
            return
        group_id = message.get("reviewer_group_id")
        if socket_principals.may_review(principal, group_id):
            await self.send_json(_progress_message(message))

    async def interrupt_snoozed(self, message):
        """This reviewer set an item aside or took it back, maybe in another tab: the page
        lists its rows again, as a reload would (the row, its chip and the count are theirs
        alone, so no shared row is pushed)."""
        if await self._still_active(await self._principal()):
            await self.send_json(
                {
                    "type": "interrupt.snoozed",
                    "interrupt_id": message["interrupt_id"],
                    "snoozed": message["snoozed"],
                }
            )

    async def thread_changed(self, message):
        principal = await self._principal()
        if not await self._still_active(principal):
            return
        if not (principal.review_all or message.get("requester_id") == self.user_id):
            return
        thread_id, status = message["thread_id"], message["status"]
        html = await renders().get(
            ("thread-row", thread_id, status), lambda: render_thread_row(thread_id)
        )
        out: ThreadMessage = {"type": "thread.changed", "thread_id": thread_id, "status": status}
        if html:
            out["html"] = html
        await self.send_json(out)

    async def thread_event(self, message):
        """Inbox pages do not show streams."""


class ThreadConsumer(_LiveConsumer):
    """One thread page: its stream, its interrupts (as decision cards) and its sections."""

    async def connect(self):
        self.user_id = self._user_id()
        self.thread_id = str(self.scope["url_route"]["kwargs"]["thread_id"])
        self._access: tuple[float, bool] = (float("-inf"), False)
        if self.user_id is None:
            await self.close(code=4401)
            return
        principal = (
            await database_sync_to_async(socket_principals.load_principals)([self.user_id])
        ).get(self.user_id, socket_principals.NOBODY)
        if not await database_sync_to_async(self._can_view)(principal):
            await self.close(code=4403)
            return
        self._access = (time.monotonic(), True)
        await self._join([listeners.thread_group(self.thread_id)], principal)

    def _can_view(self, principal: Principal) -> bool:
        if not principal.active:
            return False
        thread = Thread.objects.filter(pk=self.thread_id).values(
            "requester_id", "reviewer_group_id"
        )
        thread = thread.first()
        if thread is None:
            return False
        # The rule every surface uses (hitl.core.access), on this socket's principal.
        return can_view_thread(
            is_requester=thread["requester_id"] == self.user_id,
            review_all=principal.review_all,
            group_ids=principal.group_ids,
            thread_id=self.thread_id,
            reviewer_group_id=thread["reviewer_group_id"],
        )

    async def _allowed(self) -> Principal | None:
        principal = await self._principal()
        if not await self._still_active(principal):
            return None
        checked_at, allowed = self._access
        if time.monotonic() - checked_at >= socket_principals.PERMISSION_TTL:
            allowed = await database_sync_to_async(self._can_view)(principal)
            self._access = (time.monotonic(), allowed)
        if not allowed:
            await self.close(code=4403)
            return None
        return principal

    async def thread_event(self, message):
        if await self._allowed() is None:
            return
        out: StreamMessage = {
            "type": "thread.event",
            "thread_id": message["thread_id"],
            "event": message["event"],
        }
        await self.send_json(out)

    async def interrupt_progress(self, message):
        if await self._allowed() is not None:
            await self.send_json(_progress_message(message))

    async def interrupt_changed(self, message):
        principal = await self._allowed()
        if principal is None:
            return
        group_id = message.get("reviewer_group_id")
        out = _interrupt_message(message)
        if message["status"] == "pending":
            can_answer = socket_principals.may_review(principal, group_id)
            interrupt_id = message["interrupt_id"]
            html = await renders().get(
                ("card", interrupt_id, group_id, can_answer),
                lambda: render_interrupt_card(interrupt_id, can_answer),
            )
            if html is None:
                return
            out["html"] = html
        await self.send_json(out)

    async def thread_changed(self, message):
        if await self._allowed() is None:
            return
        sections = await database_sync_to_async(self._sections)()
        out: ThreadMessage = {
            "type": "thread.changed",
            "thread_id": message["thread_id"],
            "status": message["status"],
        }
        if sections is not None:
            out["sections"] = sections
        await self.send_json(out)

    def _sections(self) -> dict[str, str] | None:
        with snapshot.one_moment():
            thread = (
                Thread.objects.select_related("requester", "reviewer_group")
                .filter(pk=self.thread_id)
                .first()
            )
            if thread is None:
                return None
            return fragments.thread_sections(thread, self.scope["user"])
