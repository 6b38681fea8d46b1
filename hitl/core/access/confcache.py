"""Per-process copies of configuration rows that every paused run reads: the default
reviewer group, each group's policy, the active decision rules, who hears of a group's
new items.

Each copy belongs to a generation. Saving or deleting one of those rows bumps the
generation after the commit: in this process at once, and in the others through a
counter in Redis (when there is one; the embedded server is a single process).
`fresh()` reads that counter once and drops every copy if it moved, so a block of work
inside it (run_finish) sees every change committed before it began. Copies older than
MAX_AGE_SECONDS are read again anyway, in case a bump was lost (Redis down at the save).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

from hitl.core.live import redis
from hitl.core.models import ReviewerGroupPolicy
from hitl.core.models.notify import GroupNotificationSettings, NotificationPreference
from hitl.core.models.policy import DecisionRule

log = logging.getLogger(__name__)

KEY = "hitl:config-generation"
MAX_AGE_SECONDS = 60.0

_lock = threading.Lock()
_values: dict[str, tuple[float, Any]] = {}
_shared: dict[str, Any] = {"generation": None}
_local = threading.local()


def _redis() -> Any:
    return redis.client() if redis.enabled() else None


def _read_generation() -> Any:
    client = _redis()
    if client is None:
        return None
    try:
        return client.get(KEY)
    except Exception as exc:  # unknown: nothing cached can be trusted
        log.warning("could not read the configuration generation: %s", exc)
        return object()


def _drop_if_moved() -> None:
    generation = _read_generation()
    with _lock:
        if generation is None and _shared["generation"] is None:
            return
        if generation != _shared["generation"]:
            _values.clear()
            _shared["generation"] = generation


@contextlib.contextmanager
def fresh() -> Iterator[None]:
    """Check the shared generation once for everything read inside the block (at the
    first read: a block that reads nothing, a run that ended without a pause, costs
    nothing)."""
    outer = getattr(_local, "depth", 0) == 0
    if outer:
        _local.checked = False
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def get(key: str, load: Callable[[], Any]) -> Any:
    """The cached value of `key`, loaded with `load()` when missing or stale."""
    if getattr(_local, "depth", 0) == 0:
        _drop_if_moved()
    elif not getattr(_local, "checked", False):
        _drop_if_moved()
        _local.checked = True
    now = time.monotonic()
    with _lock:
        hit = _values.get(key)
    if hit is not None and now - hit[0] < MAX_AGE_SECONDS:
        return hit[1]
    value = load()
    with _lock:
        _values[key] = (now, value)
    return value


def clear() -> None:
    with _lock:
        _values.clear()


def _bump() -> None:
    clear()
    client = _redis()
    if client is None:
        return
    try:
        generation = client.incr(KEY)
    except Exception as exc:  # other processes re-read within MAX_AGE_SECONDS
        log.warning("could not announce a configuration change: %s", exc)
        return
    with _lock:
        # Our own copies were just dropped: they may follow the new generation.
        _shared["generation"] = str(generation).encode()


def changed(**kwargs: Any) -> None:
    """A configuration row changed: drop every copy once the change is committed."""
    if kwargs.get("update_fields") == frozenset({"last_login"}):
        return  # a login changes nothing cached
    clear()  # this process at once, even before the commit (its own reads see it)
    transaction.on_commit(_bump)


def connect_signals() -> None:
    user = get_user_model()
    # Users, memberships and permissions decide who is notified of a group's items.
    models = (
        Group,
        ReviewerGroupPolicy,
        DecisionRule,
        user,
        GroupNotificationSettings,
        NotificationPreference,
    )
    for model in models:
        uid = f"hitl-confcache-{model.__name__}"
        post_save.connect(changed, sender=model, dispatch_uid=f"{uid}-save", weak=False)
        post_delete.connect(changed, sender=model, dispatch_uid=f"{uid}-delete", weak=False)
    links = (
        ReviewerGroupPolicy.approval_groups.through,
        user.groups.through,
        user.user_permissions.through,
        Group.permissions.through,
    )
    for link in links:
        m2m_changed.connect(
            changed, sender=link, dispatch_uid=f"hitl-confcache-{link.__name__}", weak=False
        )
