"""Operator actions taken from a thread's page (the admin offers the same)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from hitl.core.access.permissions import thread_for_viewer
from hitl.core.errors import ServiceError
from hitl.ops import services as ops


@login_required
@require_POST
def thread_retry(request, thread_id):
    """Retry the thread's failed latest run from its last checkpoint (staff)."""
    thread = thread_for_viewer(request.user, thread_id)
    if thread is None:
        raise Http404("No such thread.")
    latest = thread.runs.order_by("-created_at").first()
    if latest is None:
        messages.error(request, "This thread has no run to retry.")
        return redirect("thread", thread_id=thread.pk)
    try:
        ops.run_retry(run_id=latest.pk, user=request.user)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Retrying the failed run from its last step.")
    return redirect("thread", thread_id=thread.pk)
