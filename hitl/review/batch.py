"""Parallel items: several interrupts one run paused on, answered one by one or all alike.

The agent resumes only once every item of its latest run is answered, so the page says
how many are left, names each item by its place in the batch, and stays on the thread
after the last answer to show the resume (with a link to the next item elsewhere).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from hitl.core import decisions, errors
from hitl.core.access.permissions import thread_for_viewer, user_can_review
from hitl.core.models import HumanInterrupt, Thread
from hitl.review.selectors import InboxQuery, interrupt_label, pending_interrupts_for

ORDER = ("created_at", "interrupt_id", "position")
BULK_TYPES = {"accept": "Accept", "ignore": "Ignore"}
DONE_WORDS = {"accept": "Accepted", "ignore": "Ignored"}


def batch_of(row: HumanInterrupt) -> list[HumanInterrupt]:
    """Every interrupt the run of `row` paused on, in the order the page shows them."""
    return list(HumanInterrupt.objects.filter(run_id=row.run_id).order_by(*ORDER))


def item_label(row: HumanInterrupt, batch: list[HumanInterrupt] | None = None) -> str:
    """What the item asks, and its place when the run paused on several ("item 2 of 3")."""
    batch = batch if batch is not None else batch_of(row)
    label = interrupt_label(row)
    if len(batch) < 2:
        return label
    place = [r.pk for r in batch].index(row.pk) + 1
    return f"{label} (item {place} of {len(batch)})"


def label_decided(rows: list[HumanInterrupt]) -> None:
    """Set `item_label` on decided rows (one query for all their runs)."""
    siblings: dict[Any, list[Any]] = {}
    run_ids = {r.run_id for r in rows}
    for run_id, pk in (
        HumanInterrupt.objects.filter(run_id__in=run_ids)
        .order_by(*ORDER)
        .values_list("run_id", "pk")
    ):
        siblings.setdefault(run_id, []).append(pk)
    for row in rows:
        pks = siblings.get(row.run_id, [row.pk])
        label = interrupt_label(row)
        row.item_label = (
            f"{label} (item {pks.index(row.pk) + 1} of {len(pks)})" if len(pks) > 1 else label
        )


def batch_context(thread: Thread, user) -> dict[str, Any]:
    """The batch line of a thread page: answered / total, bulk actions, the next item."""
    run = thread.runs.filter(interrupts__isnull=False).order_by("-created_at").first()
    if run is None:
        return {"batch": None}
    rows = list(run.interrupts.select_related("thread", "reviewer_group").order_by(*ORDER))
    if len(rows) < 2:
        return {"batch": None}
    latest = thread.runs.order_by("-created_at").first()
    pending = [r for r in rows if r.status == HumanInterrupt.Status.PENDING]
    if not pending and latest is not None and latest.pk == run.pk:
        return {"batch": None}  # answered but not resumed: cancelled, or still under undo
    mine = [r for r in pending if user_can_review(user, r)]
    bulk = []
    for kind, verb in BULK_TYPES.items():
        fits = [r for r in mine if kind in r.allowed_types]
        if len(fits) >= 2 or (fits and len(mine) >= 2):
            bulk.append(
                {"type": kind, "verb": verb, "count": len(fits), "skipped": len(mine) - len(fits)}
            )
    following = None
    if not pending:
        following = (
            pending_interrupts_for(user, InboxQuery())
            .exclude(thread_id=thread.pk)
            .order_by("-created_at", "-pk")
            .first()
        )
    return {
        "batch": {
            "total": len(rows),
            "answered": len(rows) - len(pending),
            "pending": len(pending),
            "resumed": latest
            if not pending and latest is not None and latest.pk != run.pk
            else None,
            "bulk": bulk if len(mine) >= 2 else [],
            "next": following,
        }
    }


@login_required
@require_POST
def thread_decide_all(request, thread_id):
    """Give every pending item of the thread that allows it the same answer."""
    thread = thread_for_viewer(request.user, thread_id)
    if thread is None:
        raise Http404("No such thread.")
    kind = request.POST.get("type", "")
    if kind not in BULK_TYPES:
        messages.error(request, "Choose accept or ignore for all items.")
        return redirect("thread", thread_id=thread.pk)
    rows = [
        r
        for r in thread.interrupts.pending().select_related("thread").order_by(*ORDER)
        if user_can_review(request.user, r)
    ]
    done, skipped = [], []
    for row in rows:
        label = item_label(row)
        if kind not in row.allowed_types:
            skipped.append(f"{label}: it does not allow {kind}")
            continue
        try:
            decisions.interrupt_resolve(
                interrupt_id=row.pk,
                user=request.user,
                response_type=kind,
                grace=settings.HITL_UNDO_SECONDS,
            )
        except errors.ServiceError as exc:
            skipped.append(f"{label}: {exc.message.rstrip('.')}")
        else:
            done.append(label)
    if done:
        messages.success(request, f"{DONE_WORDS[kind]} {len(done)}: {'; '.join(done)}.")
    if skipped:
        messages.warning(request, f"Left for you to answer: {'; '.join(skipped)}.")
    if not rows:
        messages.info(request, "Nothing here waits for your answer.")
    return redirect("thread", thread_id=thread.pk)
