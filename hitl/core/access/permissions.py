"""Reads: who may see and answer what."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet

from hitl.core.access import confcache
from hitl.core.models import HumanInterrupt, ReviewerGroupPolicy, Run, Thread


def user_can_review_all(user) -> bool:
    return bool(user.is_authenticated and (user.is_superuser or user.has_perm("hitl.review_all")))


def user_group_ids(user) -> set[int]:
    # Cached on the user object: permission checks run per event on sockets.
    cached = getattr(user, "_hitl_group_ids", None)
    if cached is None:
        cached = set(user.groups.values_list("id", flat=True)) if user.is_authenticated else set()
        user._hitl_group_ids = cached
    return cached


def user_can_review(user, interrupt: HumanInterrupt) -> bool:
    if not user.is_authenticated:
        return False
    # Cheapest first: a reviewer's own group (one cached query) before the permission
    # lookup (two queries), which only reviewers of every group need.
    if user.is_superuser or (
        interrupt.reviewer_group_id is not None
        and interrupt.reviewer_group_id in user_group_ids(user)
    ):
        return True
    return user_can_review_all(user)


def thread_for_viewer(user, thread_id: Any) -> Thread | None:
    """The thread, if it exists and `user` may see it (else None: the same "not found")."""
    thread = Thread.objects.filter(pk=thread_id).one_or_none()
    return thread if thread is not None and user_can_view_thread(user, thread) else None


def user_can_view_thread(user, thread: Thread) -> bool:
    if not user.is_authenticated:
        return False
    # is_staff alone grants nothing here: seeing every thread is hitl.review_all.
    if thread.requester_id == user.pk or user_can_review_all(user):
        return True
    groups = user_group_ids(user)
    if not groups:
        return False
    if thread.reviewer_group_id in groups:
        return True
    return HumanInterrupt.objects.filter(thread=thread, reviewer_group_id__in=groups).exists()


def user_can_run_thread(user, thread: Thread) -> bool:
    """Start a new run on an existing thread: its requester, or an explicit permission.

    Viewing a thread (reviewers, review_all) is not enough: a run acts with the thread's
    files and history on the requester's behalf. The same rule covers uploading into the
    thread and changing its metadata, which prepare such a run.
    """
    return thread.requester_id == user.pk or user.has_perm("hitl.run_any_thread")


def user_can_cancel_thread(user, thread: Thread) -> bool:
    """Its requester, a reviewer of every group, or whoever may change threads in admin
    (whose cancel action is the same service)."""
    return (
        thread.requester_id == user.pk
        or user_can_review_all(user)
        or user.has_perm("hitl.change_thread")
    )


def thread_list_for_user(user) -> QuerySet[Thread]:
    qs = Thread.objects.select_related("requester", "reviewer_group")
    if user_can_review_all(user):
        return qs
    groups = user_group_ids(user)
    return qs.filter(
        Q(requester=user)
        | Q(reviewer_group_id__in=groups)
        | Q(interrupts__reviewer_group_id__in=groups)
    ).distinct()


def interrupt_list_for_reviewer(user) -> QuerySet[HumanInterrupt]:
    return (
        HumanInterrupt.objects.for_reviewer(user)
        .select_related("thread", "reviewer_group", "responded_by")
        .order_by("-created_at")
    )


def thread_pending_interrupts(thread: Thread) -> QuerySet[HumanInterrupt]:
    return (
        thread.interrupts.pending()
        .select_related("reviewer_group")
        .order_by("created_at", "interrupt_id", "position")
    )


def thread_runs(thread: Thread) -> QuerySet[Run]:
    return thread.runs.order_by("-created_at")


def group_named(name: str) -> Group | None:
    """The reviewer group called `name` (a per-process copy, dropped when groups change)."""
    return confcache.get(f"group:{name}", lambda: Group.objects.filter(name=name).first())


def default_reviewer_group() -> Group:
    group = group_named(settings.HITL_DEFAULT_REVIEWER_GROUP)
    if group is None:
        # Saving it drops the cached absence; a group made here is not cached, in case
        # the transaction around us rolls back.
        group, _ = Group.objects.get_or_create(name=settings.HITL_DEFAULT_REVIEWER_GROUP)
    return group


def group_policy(group: Group) -> ReviewerGroupPolicy | None:
    """A reviewer group's policy, with its approval groups (a per-process copy)."""
    return confcache.get(
        f"policy:{group.pk}",
        lambda: (
            ReviewerGroupPolicy.objects.filter(group=group)
            .prefetch_related("approval_groups")
            .first()
        ),
    )
