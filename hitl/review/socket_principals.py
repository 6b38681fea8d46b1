"""Who is on the other end of a review socket: a user's permission state (active flag,
groups, review-all permission), loaded for every connected user in one batch and
reloaded together every PERMISSION_TTL per process (hitl/review/consumers.py)."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from hitl.core.access.permissions import can_review

log = logging.getLogger(__name__)

PERMISSION_TTL = 1.0


# --- who is on the other end ----------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    active: bool
    review_all: bool
    group_ids: frozenset[int]


NOBODY = Principal(active=False, review_all=False, group_ids=frozenset())


def may_review(principal: Principal, group_id: int | None) -> bool:
    return can_review(
        review_all=principal.review_all, group_ids=principal.group_ids, reviewer_group_id=group_id
    )


def load_principals(user_ids: list[int]) -> dict[int, Principal]:
    """Current permission state of many users in three queries."""
    User = get_user_model()
    users = {
        row["pk"]: row
        for row in User.objects.filter(pk__in=user_ids).values("pk", "is_active", "is_superuser")
    }
    groups: dict[int, set[int]] = {pk: set() for pk in users}
    for user_id, group_id in User.groups.through.objects.filter(user_id__in=users).values_list(
        "user_id", "group_id"
    ):
        groups[user_id].add(group_id)
    perm = Permission.objects.filter(codename="review_all", content_type__app_label="hitl")
    all_groups = {g for gs in groups.values() for g in gs}
    direct = set(perm.filter(user__in=list(users)).values_list("user__id", flat=True))
    via_group = set(perm.filter(group__in=all_groups).values_list("group__id", flat=True))
    result = {}
    for pk, row in users.items():
        review_all = bool(row["is_superuser"] or pk in direct or groups[pk] & via_group) and bool(
            row["is_active"]
        )
        result[pk] = Principal(
            active=bool(row["is_active"]),
            review_all=review_all,
            group_ids=frozenset(groups[pk]),
        )
    return result


class _PrincipalCache:
    """Per event loop: principals of every connected user, reloaded together in the
    background every PERMISSION_TTL while sockets are open, so an event rarely waits
    for the database to learn who may see it."""

    def __init__(self) -> None:
        self.connected: Counter[int] = Counter()
        self.entries: dict[int, Principal] = {}
        self.loaded_at = float("-inf")
        self.refresh: asyncio.Task | None = None
        self.ticker: asyncio.Task | None = None

    def add(self, user_id: int, principal: Principal) -> None:
        self.connected[user_id] += 1
        self.entries[user_id] = principal
        if self.ticker is None or self.ticker.done():
            self.ticker = asyncio.ensure_future(self._tick())

    def remove(self, user_id: int) -> None:
        self.connected[user_id] -= 1
        if self.connected[user_id] <= 0:
            del self.connected[user_id]

    async def get(self, user_id: int) -> Principal:
        # The ticker keeps entries about PERMISSION_TTL old; wait only when it lags behind.
        if time.monotonic() - self.loaded_at >= 2 * PERMISSION_TTL:
            await self._refresh()
        principal = self.entries.get(user_id)
        if principal is None:  # connected after the running batch read its user list
            loaded = await database_sync_to_async(load_principals)([user_id])
            principal = self.entries[user_id] = loaded.get(user_id, NOBODY)
        return principal

    async def _tick(self) -> None:
        while self.connected:
            await asyncio.sleep(max(PERMISSION_TTL, 0.05))
            if self.connected:
                try:
                    await self._refresh()
                except Exception:  # a failed reload is retried; events then load on demand
                    log.exception("could not reload socket permissions")

    async def _refresh(self) -> None:
        if self.refresh is None or self.refresh.done():
            self.refresh = asyncio.ensure_future(self._load())
        await asyncio.shield(self.refresh)

    async def _load(self) -> None:
        started = time.monotonic()
        ids = list(self.connected)
        loaded = await database_sync_to_async(load_principals)(ids) if ids else {}
        # Merge, never replace: users who connected while this batch ran keep their entry.
        for user_id in ids:
            self.entries[user_id] = loaded.get(user_id, NOBODY)  # deleted users: nobody
        for user_id in [u for u in self.entries if u not in self.connected]:
            del self.entries[user_id]
        self.loaded_at = started


_principal_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def principals() -> _PrincipalCache:
    loop = asyncio.get_running_loop()
    cache = _principal_caches.get(loop)
    if cache is None:
        cache = _principal_caches[loop] = _PrincipalCache()
    return cache
