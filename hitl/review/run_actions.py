"""Start a thread again from its page after its run failed or it was cancelled."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from hitl.core import errors, runs
from hitl.core.access.permissions import thread_for_viewer
from hitl.core.models import Run


@login_required
@require_POST
def thread_rerun(request, thread_id):
    """A new run with the thread's latest start input (its requester, or hitl.run_any_thread)."""
    thread = thread_for_viewer(request.user, thread_id)
    if thread is None:
        raise Http404("No such thread.")
    start = thread.runs.filter(kind=Run.Kind.START).order_by("-created_at").first()
    try:
        runs.run_start(
            graph=thread.graph,
            input=start.input if start else {},
            user=request.user,
            thread=thread,
        )
    except errors.ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "A new run started with the thread's input.")
    return redirect("thread", thread_id=thread.pk)
