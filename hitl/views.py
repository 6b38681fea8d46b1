"""Server-rendered pages: start a thread, see it, answer its interrupts."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from hitl import services
from hitl.forms import DecisionForm, StartThreadForm
from hitl.models import HumanInterrupt, Thread
from hitl.selectors import (
    interrupt_list_for_reviewer,
    thread_list_for_user,
    thread_pending_interrupts,
    thread_runs,
    user_can_view_thread,
)


@login_required
def home(request):
    form = StartThreadForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = services.run_start(
                graph=form.cleaned_data["graph"],
                input=form.cleaned_data["input"],
                title=form.cleaned_data["title"],
                user=request.user,
            )
        except services.ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("thread", thread_id=run.thread_id)
    threads = thread_list_for_user(request.user).order_by("-updated_at")[:50]
    pending = interrupt_list_for_reviewer(request.user).filter(
        status=HumanInterrupt.Status.PENDING
    )[:50]
    return render(request, "hitl/home.html", {"form": form, "threads": threads, "pending": pending})


def _thread_or_404(request, thread_id) -> Thread:
    thread = (
        Thread.objects.filter(pk=thread_id).select_related("requester", "reviewer_group").first()
    )
    if thread is None or not user_can_view_thread(request.user, thread):
        raise Http404("No such thread.")
    return thread


@login_required
def thread_detail(request, thread_id):
    thread = _thread_or_404(request, thread_id)
    interrupts = [
        (row, json.dumps(row.args, indent=2)) for row in thread_pending_interrupts(thread)
    ]
    return render(
        request,
        "hitl/thread.html",
        {"thread": thread, "interrupts": interrupts, "runs": thread_runs(thread)[:20]},
    )


@login_required
def thread_status(request, thread_id):
    thread = _thread_or_404(request, thread_id)
    return JsonResponse({"status": thread.status, "pending": thread.interrupts.pending().count()})


@login_required
@require_POST
def interrupt_decide(request, interrupt_id):
    row = HumanInterrupt.objects.filter(pk=interrupt_id).select_related("thread").first()
    if row is None or not user_can_view_thread(request.user, row.thread):
        raise Http404("No such interrupt.")
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a decision.")
        return redirect("thread", thread_id=row.thread_id)
    try:
        services.interrupt_resolve(
            interrupt_id=row.pk,
            user=request.user,
            response_type=form.cleaned_data["type"],
            args=form.decision_args(row.action),
        )
    except (services.ServiceError, ValidationError) as exc:
        messages.error(request, getattr(exc, "message", None) or "; ".join(exc.messages))
    else:
        messages.success(request, "Decision recorded.")
    return redirect("thread", thread_id=row.thread_id)


@login_required
@require_POST
def thread_cancel(request, thread_id):
    thread = _thread_or_404(request, thread_id)
    try:
        services.thread_cancel(thread=thread, user=request.user)
    except services.ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("thread", thread_id=thread.pk)
