"""Time travel on the thread page: the checkpoint history and forking from a step."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from hitl.core import errors
from hitl.core.access.permissions import user_can_run_thread, user_can_view_thread
from hitl.core.models import Thread
from hitl.core.remote import state as remote_state
from hitl.core.runs import timetravel
from hitl.review.views import _render_thread

MAX_EDIT_BYTES = 64 * 1024


def history_context(thread: Thread, user) -> dict:
    """What the history section shows: steps, newest first, and whether forking is allowed."""
    can_fork = user_can_run_thread(user, thread) and thread.status not in (
        Thread.Status.BUSY,
        Thread.Status.INTERRUPTED,
    )
    link = remote_state.remote_link(thread)
    if link is not None:
        # Another deployment's thread: its history is read there; forks are made there too.
        try:
            return {"checkpoints": remote_state.remote_checkpoints(link), "can_fork": False}
        except remote_state.RemoteUnreadable:
            return {"checkpoints": [], "can_fork": False}
    return {"checkpoints": timetravel.thread_checkpoints(thread), "can_fork": can_fork}


@login_required
@require_POST
def thread_fork(request, thread_id):
    thread = get_object_or_404(Thread, pk=thread_id)
    if not user_can_view_thread(request.user, thread):
        raise Http404("No such thread.")  # as every thread page: no existence oracle
    raw = request.POST.get("values", "").strip()
    values = None
    try:
        if raw:
            if len(raw.encode()) > MAX_EDIT_BYTES:
                raise errors.Invalid("The state edit is too large (64 KiB at most).")
            try:
                values = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise errors.Invalid(
                    f"The state edit is not valid JSON: {exc.msg} (line {exc.lineno})."
                ) from None
        run = timetravel.thread_fork(
            thread=thread,
            user=request.user,
            checkpoint_id=request.POST.get("checkpoint_id", ""),
            values=values,
        )
    except errors.ServiceError as exc:
        messages.error(request, exc.message)
        if isinstance(exc, errors.Forbidden):  # may view, may not change: the page, 403
            return _render_thread(request, thread, status=403)
    else:
        edited = " with an edited state" if values else ""
        messages.success(request, f"Forked from the chosen step{edited}: run {run.pk} started.")
    return redirect("thread", thread_id=thread.pk)
