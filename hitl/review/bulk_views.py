"""Bulk decisions from the inbox: the selected rows, or every pending item matching the
inbox's filter across all pages, decided one by one through the decision service."""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from hitl.core import decisions
from hitl.core.decisions.bulk import MAX_BULK_ITEMS, interrupt_bulk_decide, parse_ids
from hitl.core.errors import Invalid, ServiceError, check_json
from hitl.review.forms import InboxFilterForm
from hitl.review.selectors import (
    interrupt_label,
    pending_interrupts_for,
    reviewer_groups_for_filter,
)

OUTCOME_WORDS = {
    "decided": "decided",
    "skipped": "skipped",
    "answered": "already answered",
    "refused": "refused",
}


def _matching(request, data) -> list[str]:
    """Ids of every pending item the inbox's filter shows this user, oldest first."""
    filters = InboxFilterForm(
        data, groups=reviewer_groups_for_filter(request.user), default_tab="pending"
    )
    query = filters.query(strict=True)  # an invalid value must not widen the match
    qs = pending_interrupts_for(request.user, query).order_by("created_at", "pk")
    ids = [str(pk) for pk in qs.values_list("pk", flat=True)[: MAX_BULK_ITEMS + 1]]
    if len(ids) > MAX_BULK_ITEMS:
        raise Invalid(f"More than {MAX_BULK_ITEMS} items match; narrow the filter.")
    return ids


@login_required
@require_http_methods(["GET", "POST"])
def interrupt_bulk(request):
    """GET: how many pending items match the filter. POST: decide the chosen items."""
    try:
        check_json(dict(request.GET.lists()), "query")
        if request.method == "GET":
            return JsonResponse({"count": len(_matching(request, request.GET))})
        check_json(dict(request.POST.lists()), "body")
        if request.POST.get("scope") == "filter":
            ids = _matching(request, request.POST)
            if not ids:
                raise Invalid("Nothing matches this filter any more.")
        else:
            ids = request.POST.getlist("ids")
        results = interrupt_bulk_decide(
            user=request.user,
            interrupt_ids=ids,
            response_type=request.POST.get("type", ""),
            text=request.POST.get("text", ""),
            grace=settings.HITL_UNDO_SECONDS,
        )
    except Invalid as exc:
        return JsonResponse({"error": exc.message}, status=400)
    counts = Counter(result.outcome for result in results)
    items = [
        {
            "id": result.interrupt_id,
            "outcome": result.outcome,
            "word": OUTCOME_WORDS[result.outcome],
            "reason": result.reason,
            "label": interrupt_label(result.row) if result.row else "",
            "thread": (result.row.thread.title or str(result.row.thread_id)) if result.row else "",
            "href": (
                reverse("thread", args=[result.row.thread_id]) + f"#interrupt-{result.row.pk}"
                if result.row
                else ""
            ),
        }
        for result in results
    ]
    # The same grace period as a single decision: one Undo for every item just decided.
    until = [r.row.undo_until for r in results if r.outcome == "decided" and r.row.undo_until]
    undo = (
        {
            "url": reverse("interrupt-bulk-undo"),
            "ids": [r.interrupt_id for r in results if r.outcome == "decided"],
            "seconds": max(0.0, (min(until) - timezone.now()).total_seconds()),
        }
        if until
        else None
    )
    html = render_to_string(
        "hitl/partials/bulk_results.html",
        {
            "items": items,
            "summary": [(o, w, counts[o]) for o, w in OUTCOME_WORDS.items() if counts[o]],
            "undo": undo,
        },
        request=request,
    )
    return JsonResponse({"counts": dict(counts), "results": items, "html": html, "undo": undo})


@login_required
@require_POST
def interrupt_bulk_undo(request):
    """Take back the user's own bulk decisions while their grace period lasts."""
    try:
        check_json(dict(request.POST.lists()), "body")
        ids = parse_ids(request.POST.getlist("ids"))
    except Invalid as exc:
        return JsonResponse({"error": exc.message}, status=400)
    undone, refused = [], []
    for pk in ids:
        try:
            decisions.interrupt_undo(interrupt_id=pk, user=request.user)
        except ServiceError as exc:
            refused.append({"id": str(pk), "reason": exc.message})
        else:
            undone.append(str(pk))
    if undone and not refused:
        message = f"Undone: {len(undone)} item{'s' if len(undone) != 1 else ''} wait again."
    elif undone:
        message = (
            f"Undone: {len(undone)}; not undone: {len(refused)} "
            f"({refused[0]['reason'].rstrip('.')})."
        )
    else:
        message = f"Nothing undone: {refused[0]['reason'] if refused else 'no items.'}"
    status = 200 if undone else 409
    return JsonResponse({"undone": undone, "refused": refused, "message": message}, status=status)
