"""Bulk decisions from the inbox: the selected rows, or every pending item matching the
inbox's filter across all pages, decided one by one through the decision service."""

from __future__ import annotations

from collections import Counter

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from hitl.core.decisions.bulk import MAX_BULK_ITEMS, interrupt_bulk_decide
from hitl.core.errors import Invalid, check_json
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
    qs = pending_interrupts_for(request.user, filters.query()).order_by("created_at", "pk")
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
            "href": (
                reverse("thread", args=[result.row.thread_id]) + f"#interrupt-{result.row.pk}"
                if result.row
                else ""
            ),
        }
        for result in results
    ]
    html = render_to_string(
        "hitl/partials/bulk_results.html",
        {
            "items": items,
            "summary": [(o, w, counts[o]) for o, w in OUTCOME_WORDS.items() if counts[o]],
        },
        request=request,
    )
    return JsonResponse({"counts": dict(counts), "results": items, "html": html})
