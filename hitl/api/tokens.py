"""API token authentication, with a short per-process cache of who a token belongs to.

A client sends its token with every request; looking it up each time costs a database
query and, on async views, a hop to a worker thread. The cache answers repeats from
memory. It holds a user's fields, never the user object, so each request gets a fresh
instance (no permission cache carried from one request to the next). Deleting a token,
or saving or deleting its user, empties the cache of the process that made the change
at once; other processes notice within TOKEN_CACHE_SECONDS.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from django.utils import timezone
from ninja.security import APIKeyHeader, HttpBearer

from hitl.core.db.retry import retry_transient
from hitl.core.models import ApiToken

TOKEN_CACHE_SECONDS = 5.0
_MAX_ENTRIES = 10_000


class _TokenCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, type, dict[str, Any]]] = {}

    def get(self, key_hash: str):
        with self._lock:
            entry = self._entries.get(key_hash)
        if entry is None or entry[0] < time.monotonic():
            return None
        _, model, fields = entry
        user = model(**fields)
        user._state.adding, user._state.db = False, "default"
        return user

    def put(self, key_hash: str, user) -> None:
        fields = {f.attname: getattr(user, f.attname) for f in user._meta.concrete_fields}
        with self._lock:
            if len(self._entries) >= _MAX_ENTRIES:
                self._entries.clear()
            self._entries[key_hash] = (time.monotonic() + TOKEN_CACHE_SECONDS, type(user), fields)

    def clear(self, *_: Any, **__: Any) -> None:
        with self._lock:
            self._entries.clear()


cache = _TokenCache()
post_delete.connect(cache.clear, sender=ApiToken, dispatch_uid="hitl-token-cache-token")
post_save.connect(cache.clear, sender=get_user_model(), dispatch_uid="hitl-token-cache-user")
post_delete.connect(cache.clear, sender=get_user_model(), dispatch_uid="hitl-token-cache-del")


@retry_transient  # a read (and an idempotent touch): safe to repeat
def user_for_key(key: str | None):
    """The active user a token belongs to, or None."""
    if not key:
        return None
    key_hash = ApiToken.hash_key(key)
    user = cache.get(key_hash)
    if user is not None:
        return user
    token = ApiToken.objects.select_related("user").filter(key_hash=key_hash).first()
    if token is None or not token.user.is_active:
        return None
    # Touch last_used_at at most once a minute: no write per request.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    cache.put(key_hash, token.user)
    return token.user


class _EitherMode:
    """Ninja calls `is_async` callbacks on async views and awaits what they return: a
    cached user then costs no hop to a worker thread. On sync views (no running loop in
    this thread) the lookup runs directly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Ninja sets `is_async` per instance from `authenticate` (sync here): without
        # this, every async view would run the callback through sync_to_async.
        self.is_async = True

    def _authenticate(self, request, key: str | None):
        user = user_for_key(key)
        if user is not None:
            request.user = user
        return user

    def _answer(self, request, key: str | None):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._authenticate(request, key)
        return self._authenticate_async(request, key)

    async def _authenticate_async(self, request, key: str | None):
        if not key:
            return None
        user = cache.get(ApiToken.hash_key(key))
        if user is None:
            return await sync_to_async(self._authenticate)(request, key)
        request.user = user
        return user


class TokenHeader(_EitherMode, APIKeyHeader):
    param_name = "X-Api-Key"

    def __call__(self, request):
        return self._answer(request, self._get_key(request))

    def authenticate(self, request, key):
        return self._authenticate(request, key)


class TokenBearer(_EitherMode, HttpBearer):
    def __call__(self, request):
        headers = request.headers
        auth_value = headers.get(self.header)
        if not auth_value:
            return None
        parts = auth_value.split(" ")
        if parts[0].lower() != self.openapi_scheme:
            return None
        return self._answer(request, " ".join(parts[1:]))

    def authenticate(self, request, token):
        return self._authenticate(request, token)
