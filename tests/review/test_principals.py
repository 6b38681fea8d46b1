"""The per-process permission cache of the live sockets (no database: a fake loader)."""

from __future__ import annotations

import asyncio
import time

from hitl.review import socket_principals
from hitl.review.socket_principals import NOBODY, Principal, _PrincipalCache

RITA = Principal(active=True, review_all=False, group_ids=frozenset({1}))


def slow_loader(calls: list[list[int]], delay: float = 0.2):
    def load(ids):
        calls.append(list(ids))
        time.sleep(delay)
        return {uid: RITA for uid in ids}

    return load


def test_a_user_who_connects_during_a_reload_is_not_locked_out(monkeypatch):
    calls: list[list[int]] = []
    monkeypatch.setattr(socket_principals, "load_principals", slow_loader(calls))

    async def scenario():
        cache = _PrincipalCache()
        cache.add(5, RITA)
        reload = asyncio.ensure_future(cache._refresh())  # reads the user list [5]
        await asyncio.sleep(0.05)
        cache.add(7, RITA)  # connects while that batch is running
        assert await cache.get(7) == RITA
        await reload
        assert cache.entries[7] == RITA  # the finished batch merged, it did not replace
        for uid in (5, 7):
            cache.remove(uid)
        cache.ticker.cancel()

    asyncio.run(scenario())
    assert calls[0] == [5]


def test_one_batch_serves_every_socket_and_deleted_users_become_nobody(monkeypatch):
    calls: list[list[int]] = []

    def load(ids):
        calls.append(sorted(ids))
        return {uid: RITA for uid in ids if uid != 9}  # user 9 was deleted

    monkeypatch.setattr(socket_principals, "load_principals", load)
    monkeypatch.setattr(socket_principals, "PERMISSION_TTL", 0.0)

    async def scenario():
        cache = _PrincipalCache()
        for uid in (7, 8, 9):
            cache.add(uid, RITA)
        results = await asyncio.gather(cache.get(7), cache.get(8), cache.get(9))
        for uid in (7, 8, 9):
            cache.remove(uid)
        cache.ticker.cancel()
        return results

    assert asyncio.run(scenario()) == [RITA, RITA, NOBODY]
    assert calls[0] == [7, 8, 9]
    assert len(calls) == 1  # three sockets, one reload
