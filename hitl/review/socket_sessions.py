"""The session each socket was opened with: logout, expiry and password changes close it."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import weakref
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.crypto import constant_time_compare

log = logging.getLogger(__name__)

SESSION_TTL = 2.0


def session_group(session_key: str) -> str:
    """The channel group of one session's sockets (a logout closes them)."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def user_sessions_group(user_id: int) -> str:
    """The channel group of all of a user's sockets (a password change re-checks them)."""
    return f"sessions.user.{user_id}"


def _hash_matches(user, stored: str | None) -> bool:
    """The session's auth hash is the user's, with SECRET_KEY or a fallback (as Django's
    own `get_user` accepts it)."""
    if not stored:
        return False
    if constant_time_compare(stored, user.get_session_auth_hash()):
        return True
    secret_hash = getattr(user, "_get_session_auth_hash", None)
    return secret_hash is not None and any(
        constant_time_compare(stored, secret_hash(secret=key))
        for key in settings.SECRET_KEY_FALLBACKS
    )


def live_sessions(sockets: dict[str, int]) -> dict[str, float]:
    """Of these sessions (key -> the user its sockets signed in as), those still signed in
    as that user with an unchanged password: key -> expiry as a POSIX timestamp."""
    from importlib import import_module

    from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY

    store = import_module(settings.SESSION_ENGINE).SessionStore
    now = timezone.now()
    found: dict[str, tuple[dict, float]] = {}
    if hasattr(store, "get_model_class"):  # database sessions: one query for all
        rows = store.get_model_class().objects.filter(
            session_key__in=list(sockets), expire_date__gt=now
        )
        for row in rows:
            found[row.session_key] = (store().decode(row.session_data), row.expire_date.timestamp())
    else:
        for key in sockets:
            session = store(session_key=key)
            data = session.load()
            if data:
                found[key] = (data, session.get_expiry_date().timestamp())
    users = get_user_model().objects.in_bulk({sockets[key] for key in found})
    live = {}
    for key, (data, expires) in found.items():
        user = users.get(sockets[key])
        if (
            user is not None
            and str(data.get(SESSION_KEY)) == str(user.pk)
            and _hash_matches(user, data.get(HASH_SESSION_KEY))
        ):
            live[key] = expires
    return live


class _SessionWatch:
    """Per event loop: the sessions of every open socket, re-read together every
    SESSION_TTL; a socket whose session ended is told to close."""

    def __init__(self) -> None:
        self.sockets: dict[str, set[str]] = {}  # session key -> channel names
        self.users: dict[str, int] = {}
        self.expires: dict[str, float] = {}
        self.ticker: asyncio.Task | None = None

    def add(self, session_key: str, user_id: int, channel: str, expires: float) -> None:
        self.sockets.setdefault(session_key, set()).add(channel)
        self.users[session_key] = user_id
        self.expires[session_key] = expires
        if self.ticker is None or self.ticker.done():
            self.ticker = asyncio.ensure_future(self._tick())

    def remove(self, session_key: str, channel: str) -> None:
        channels = self.sockets.get(session_key)
        if channels is not None:
            channels.discard(channel)
            if not channels:
                del self.sockets[session_key]
                self.users.pop(session_key, None)
                self.expires.pop(session_key, None)

    def expired(self, session_key: str) -> bool:
        return time.time() >= self.expires.get(session_key, 0.0)

    async def check(self, session_keys: list[str]) -> set[str]:
        """Re-read these sessions; the ones that ended (their sockets are told to close)."""
        asked = {key: self.users[key] for key in session_keys if key in self.users}
        live = await database_sync_to_async(live_sessions)(asked) if asked else {}
        self.expires.update(live)
        ended = set(asked) - set(live)
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        for key in ended:
            for channel in list(self.sockets.get(key, ())):
                await layer.send(channel, {"type": "session.ended"})
        return ended

    async def _tick(self) -> None:
        while self.sockets:
            await asyncio.sleep(SESSION_TTL)
            try:
                await self.check(list(self.sockets))
            except Exception:  # retried next tick; a push past expiry re-checks itself
                log.exception("could not re-check socket sessions")


def _send_to_group(group: str, message: dict[str, Any]) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        if loop is None:
            async_to_sync(layer.group_send)(group, message)
        else:  # a save inside a running loop (async_to_sync would refuse): send from it
            _pending_sends.add(task := loop.create_task(layer.group_send(group, message)))
            task.add_done_callback(_sent)
    except Exception:  # the sockets still re-check within SESSION_TTL
        log.exception("could not tell the sockets of %s", group)


_pending_sends: set[asyncio.Task] = set()


def _sent(task: asyncio.Task) -> None:
    _pending_sends.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("could not tell the sockets", exc_info=task.exception())


def on_logged_out(sender, request, user, **kwargs) -> None:
    """user_logged_out (sent before the session is flushed): close its sockets now."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        _send_to_group(session_group(key), {"type": "session.ended"})


def on_user_saved(sender, instance, update_fields=None, **kwargs) -> None:
    """post_save of a user (a new password, deactivation): their sockets re-check their
    sessions once the change is committed. A save of other fields only (`last_login` on
    every login) changes no session."""
    from django.db import transaction

    if update_fields is not None and not {"password", "is_active"} & set(update_fields):
        return

    group = user_sessions_group(instance.pk)
    transaction.on_commit(lambda: _send_to_group(group, {"type": "session.check"}))


_session_watches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def session_watch() -> _SessionWatch:
    loop = asyncio.get_running_loop()
    watch = _session_watches.get(loop)
    if watch is None:
        watch = _session_watches[loop] = _SessionWatch()
    return watch
