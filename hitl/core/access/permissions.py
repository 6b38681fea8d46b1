"""Who may do what: one rule per action, used by pages, every API, sockets, files and
admin actions alike. Staff status grants nothing here (it only opens admin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet

from hitl.core.access import confcache
from hitl.core.models import Cron, HumanInterrupt, ReviewerGroupPolicy, Run, Thread


def user_can_review_all(user) -> bool:
    return bool(user.is_authenticated and (user.is_superuser or user.has_perm("hitl.review_all")))


def user_group_ids(user) -> set[int]:
    # Cached on the user object: permission checks run per event on sockets.
    cached = getattr(user, "_hitl_group_ids", None)
    if cached is None:
        cached = set(user.groups.values_list("id", flat=True)) if user.is_authenticated else set()
        user._hitl_group_ids = cached
    return cached


def _holds(fact: Any) -> Any:
    # Facts that cost queries come as callables, asked only when the rule needs them.
    return fact() if callable(fact) else fact


def can_review(
    *, review_all: bool | Callable[[], bool], group_ids, reviewer_group_id: int | None
) -> bool:
    """The rule for answering (and being shown) an interrupt routed to a group: its
    group's members and reviewers of every group. `review_all` may be a callable, asked
    only when group membership does not already decide (it costs queries)."""
    if reviewer_group_id is not None and reviewer_group_id in group_ids:
        return True
    return _holds(review_all)


def can_view_thread(
    *,
    is_requester: bool,
    review_all: bool | Callable[[], bool],
    group_ids,
    thread_id: Any,
    reviewer_group_id: int | None,
) -> bool:
    """The rule for seeing a thread: its requester, reviewers of every group, and
    members of a group the thread or any of its interrupts is routed to."""
    if is_requester or _holds(review_all):
        return True
    group_ids = _holds(group_ids)
    if not group_ids:
        return False
    if reviewer_group_id in group_ids:
        return True
    return HumanInterrupt.objects.filter(
        thread_id=thread_id, reviewer_group_id__in=group_ids
    ).exists()


def user_can_review(user, interrupt: HumanInterrupt) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    # A reviewer's own group (one cached query) before the permission lookup (two
    # queries), which only reviewers of every group need.
    return can_review(
        review_all=lambda: user_can_review_all(user),
        group_ids=user_group_ids(user),
        reviewer_group_id=interrupt.reviewer_group_id,
    )


def thread_for_viewer(user, thread_id: Any) -> Thread | None:
    """The thread, if it exists and `user` may see it (else None: the same "not found")."""
    thread = Thread.objects.filter(pk=thread_id).one_or_none()
    return thread if thread is not None and user_can_view_thread(user, thread) else None


def user_can_view_thread(user, thread: Thread) -> bool:
    if not user.is_authenticated:
        return False
    return can_view_thread(
        is_requester=thread.requester_id == user.pk,
        review_all=lambda: user_can_review_all(user),
        group_ids=lambda: user_group_ids(user),
        thread_id=thread.pk,
        reviewer_group_id=thread.reviewer_group_id,
    )


def user_can_start_runs(user) -> bool:
    """Start a run at all (a new thread needs nothing more): an active account.

    A login session already ends with the account; this is for what acts on a user's
    behalf without one (a cron's tick).
    """
    return bool(user is not None and user.is_active)


def user_can_run_thread(user, thread: Thread) -> bool:
    """Start a new run on an existing thread: its requester, or an explicit permission.

    Viewing a thread (reviewers, review_all) is not enough: a run acts with the thread's
    files and history on the requester's behalf. The same rule covers uploading into the
    thread and changing its metadata, which prepare such a run.
    """
    return thread.requester_id == user.pk or user.has_perm("hitl.run_any_thread")


def user_can_change_thread(user, thread: Thread) -> bool:
    """Delete or copy the thread, rewrite its state, delete its runs: what its requester
    may do, or a holder of hitl.run_any_thread (who acts for the requester)."""
    return user_can_run_thread(user, thread)


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
    return thread.interrupts.pending().select_related("reviewer_group").in_order()


def thread_runs(thread: Thread) -> QuerySet[Run]:
    return thread.runs.order_by("-created_at")


def group_named(name: str) -> Group | None:
    """The reviewer group called `name` (a per-process copy, dropped when groups change)."""
    return confcache.get(f"group:{name}", lambda: Group.objects.filter(name=name).first())


def group_with_id(pk: int) -> Group | None:
    """The group with primary key `pk` (a per-process copy, dropped when groups change)."""
    return confcache.get(f"group-id:{pk}", lambda: Group.objects.filter(pk=pk).first())


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


def user_can_change_assistant(user, assistant) -> bool:
    """Change, re-version or delete an assistant: its creator, or the model permission
    (hitl.change_assistant) that also manages assistants in admin."""
    if not user.is_authenticated:
        return False
    if user.is_superuser or (assistant.created_by_id and assistant.created_by_id == user.pk):
        return True
    return user.has_perm("hitl.change_assistant")


def user_can_use_store(user) -> bool:
    """Read and write LangGraph's store over the API: it is every graph's shared memory
    (any user's, any thread's), so it takes a permission; graphs use it freely."""
    return bool(user.is_authenticated and (user.is_superuser or user.has_perm("hitl.use_store")))


def cron_list_for_user(user):
    """The crons a user sees, changes and deletes: their own (a superuser's: all)."""
    if not user.is_authenticated:
        return Cron.objects.none()
    crons = Cron.objects.all() if user.is_superuser else Cron.objects.filter(user=user)
    return crons.select_related("thread")
