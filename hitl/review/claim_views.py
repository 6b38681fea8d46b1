"""Claim ("I'm on it"), release and snooze ("not now") from a thread page or the inbox."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from hitl.core.decisions import claims
from hitl.core.errors import Invalid, NotFound, ServiceError, check_json
from hitl.core.models import HumanInterrupt
from hitl.review.selectors import interrupt_label, next_pending_for

SNOOZE_CHOICES = {"1h": timedelta(hours=1), "4h": timedelta(hours=4), "1d": timedelta(days=1)}


def _back(request, row_thread_id, interrupt_id) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}):
        return target
    if row_thread_id is None:
        return reverse("home")
    return reverse("thread", args=[row_thread_id]) + f"#interrupt-{interrupt_id}"


def _answer(request, interrupt_id, done: str, exc: ServiceError | None):
    thread_id = (
        HumanInterrupt.objects.filter(pk=interrupt_id).values_list("thread_id", flat=True).first()
    )
    if "application/json" in request.headers.get("Accept", ""):
        if exc is not None:
            return JsonResponse({"error": exc.message}, status=exc.status_code)
        return JsonResponse({"ok": True, "message": done})
    if exc is not None:
        if isinstance(exc, NotFound):
            raise Http404(exc.message)
        messages.error(request, exc.message)
    else:
        messages.success(request, done)
    return redirect(_back(request, thread_id, interrupt_id))


def _until(request) -> datetime:
    choice = request.POST.get("for", "")
    if choice in SNOOZE_CHOICES:
        return timezone.now() + SNOOZE_CHOICES[choice]
    raw = request.POST.get("until", "").strip()
    if not raw:
        raise Invalid("Pick when the item should come back.")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise Invalid("Pick a date and time (YYYY-MM-DDTHH:MM).") from None
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


@login_required
@require_POST
def interrupt_claim(request, interrupt_id):
    try:
        claim = claims.interrupt_claim(interrupt_id=interrupt_id, user=request.user)
    except ServiceError as exc:
        return _answer(request, interrupt_id, "", exc)
    until = timezone.localtime(claim.expires_at)
    return _answer(request, interrupt_id, f"You are on it until {until:%H:%M}.", None)


@login_required
@require_POST
def interrupt_unclaim(request, interrupt_id):
    try:
        claims.interrupt_unclaim(interrupt_id=interrupt_id, user=request.user)
    except ServiceError as exc:
        return _answer(request, interrupt_id, "", exc)
    return _answer(request, interrupt_id, "Released: anyone may take it.", None)


@login_required
@require_POST
def interrupt_snooze(request, interrupt_id):
    try:
        check_json(dict(request.POST.lists()), "body")
        until = _until(request)
        claims.interrupt_snooze(interrupt_id=interrupt_id, user=request.user, until=until)
    except ServiceError as exc:
        return _answer(request, interrupt_id, "", exc)
    row = HumanInterrupt.objects.select_related("thread").get(pk=interrupt_id)
    when = timezone.localtime(until)
    done = (
        f"Hidden from your pending list until {when:%Y-%m-%d %H:%M}: {interrupt_label(row)} "
        f"on “{row.thread.title or row.thread_id}” (Show snoozed in the inbox lists it)."
    )
    if "application/json" in request.headers.get("Accept", ""):
        return _answer(request, interrupt_id, done, None)
    messages.success(request, done)
    return redirect(_after_snooze(request, row))


def _after_snooze(request, row: HumanInterrupt) -> str:
    """Off the card just set aside: the thread's next free item, else the inbox."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}):
        return target
    following = next_pending_for(request.user, row)
    if following is not None and following.thread_id == row.thread_id:
        return reverse("thread", args=[row.thread_id]) + f"#interrupt-{following.pk}"
    return reverse("home")


@login_required
@require_POST
def interrupt_unsnooze(request, interrupt_id):
    try:
        claims.interrupt_unsnooze(interrupt_id=interrupt_id, user=request.user)
    except ServiceError as exc:
        return _answer(request, interrupt_id, "", exc)
    return _answer(request, interrupt_id, "Back on your pending list.", None)
