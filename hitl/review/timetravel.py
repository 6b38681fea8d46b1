"""Time travel on the thread page: the checkpoint history and forking from a step."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST

from hitl.core import errors
from hitl.core.access.permissions import user_can_run_thread, user_can_view_thread
from hitl.core.history import timetravel
from hitl.core.history.branches import Branches, thread_branches
from hitl.core.history.history import (
    MAX_CHECKPOINT_ID,
    Step,
    thread_history_page,
    thread_step_state,
)
from hitl.core.models import Thread
from hitl.core.remote import state as remote_state
from hitl.review.fragments import credit_editors
from hitl.review.views import _render_thread

MAX_EDIT_BYTES = 64 * 1024


def history_context(thread: Thread) -> dict:
    """The history shell the thread page embeds: the steps load when it is opened."""
    return {"branches": thread_branches(thread), "remote_link": remote_state.remote_link(thread)}


@login_required
@require_GET
def thread_history(request, thread_id):
    """A page of the thread's steps, newest first (a fragment with ?partial=1)."""
    thread = get_object_or_404(Thread, pk=thread_id)
    if not user_can_view_thread(request.user, thread):
        raise Http404("No such thread.")
    before = request.GET.get("before") or None
    state = request.GET.get("state") or None
    for chosen in (before, state):
        if chosen is not None and (len(chosen) > MAX_CHECKPOINT_ID or not chosen.isprintable()):
            return HttpResponse("Choose a step of this thread's history.", status=400)
    partial = bool(request.GET.get("partial"))
    link = remote_state.remote_link(thread)
    if link is not None:
        return _remote_history(request, thread, link, partial)
    if state is not None:
        try:
            text = thread_step_state(thread, state)
        except errors.ServiceError as exc:
            return HttpResponse(exc.message, status=exc.status_code, content_type="text/plain")
        return render(request, "hitl/partials/thread_step_state.html", {"state": text})
    page = thread_history_page(thread, before=before, with_values=not partial)
    credit_editors([row for step in page.steps for row in step.decisions])
    context = {
        "thread": thread,
        "steps": page.steps,
        "more_before": page.more_before,
        "branches": page.branches,
        "can_fork": user_can_run_thread(request.user, thread)
        and thread.status not in (Thread.Status.BUSY, Thread.Status.INTERRUPTED),
    }
    if partial:
        return render(request, "hitl/partials/thread_history_steps.html", context)
    return render(request, "hitl/thread_history.html", context)


def _remote_history(request, thread: Thread, link, partial: bool):
    """Another deployment's thread: its history is read there (up to 50 steps, states
    included) and forks are made there too."""
    try:
        found, unreadable = remote_state.remote_checkpoints(link), False
    except remote_state.RemoteUnreadable:
        found, unreadable = [], True
    steps = []
    for cp in found:
        source = str(cp["source"] or "")
        step = Step(
            checkpoint_id=str(cp["checkpoint_id"]),
            step=cp["step"],
            source=source,
            kind="remote",
            # LangGraph's own nodes (__start__, __end__) are not the graph's steps.
            next=[name for name in cp["next"] if not str(name).startswith("__")],
            created_at=parse_datetime(str(cp["created_at"] or "")),
            run_id=None,
            values_json=cp["values_json"],
        )
        step.kind, step.node = _remote_step_words(source, step.next, bool(cp["next"]))
        steps.append(step)
    context = {
        "thread": thread,
        "steps": steps,
        "more_before": None,
        "branches": Branches(),
        "can_fork": False,
        "unreadable": unreadable,
    }
    template = "hitl/partials/thread_history_steps.html" if partial else "hitl/thread_history.html"
    return render(request, template, context)


REMOTE_SOURCES = {"update": "State updated", "fork": "Forked"}


def _remote_step_words(source: str, next_nodes: list[str], more: bool) -> tuple[str, str]:
    """(kind, what to call it) of a remote step, in the words of local ones: LangGraph's
    "input" is the run's start, "loop" the nodes that run from it, no next its end."""
    if source == "input":
        return "input", ""
    if not more:
        return "remote", "End"
    return "remote", REMOTE_SOURCES.get(source) or ", ".join(next_nodes) or "Start"


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
