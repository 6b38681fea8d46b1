"""One-click decisions from an e-mail: the link shows the item and one button to confirm.

A GET never decides (mail scanners fetch every link); the POST of the confirmation page
does, as the link's recipient, through core's email_link_use.
"""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.mail import send_mail
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from hitl.core.access.links import link_token
from hitl.core.access.summary import item_summary
from hitl.core.decisions import email_links
from hitl.core.decisions.claims import active_claim
from hitl.core.errors import ServiceError
from hitl.core.models import HumanInterrupt
from hitl.review import rendering
from hitl.review.sessions import allows_anonymous

MAX_ANSWER = 20_000
DONE = {"accept": "Approved", "ignore": "Ignored", "response": "Answer sent"}


def _refusal(request, exc: ServiceError, token: str = ""):
    if isinstance(exc, email_links.NotLoggedIn):
        return redirect_to_login(request.get_full_path())
    return render(
        request,
        "hitl/email_action.html",
        {"error": exc.message, "token": token},
        status=exc.status_code,
    )


@allows_anonymous  # the signed link names the user (unless the operator asks for a login)
@require_http_methods(["GET", "POST"])
def email_action(request, token: str):
    """GET: the item and a confirm button. POST: decide, as the link's recipient."""
    try:
        link = email_links.email_link_get(token)
        email_links.check_session(link, request.user)
    except ServiceError as exc:
        return _refusal(request, exc)
    row = link.interrupt
    context = {
        "link": link,
        "row": row,
        "token": token,
        "label": email_links.LABELS[link.response_type],
        # What the e-mail showed (credentials masked): the link may be opened without a login.
        "summary": item_summary(row),
        "description_html": rendering.markdown(row.description),
        "claim": active_claim(row) if row.status == HumanInterrupt.Status.PENDING else None,
        "used": link.used_at is not None,
        "card": reverse("notify-open", args=[link_token(row.pk)]),
    }
    if request.method == "GET":
        return render(request, "hitl/email_action.html", context)
    answer = request.POST.get("answer", "")
    if link.response_type == "response":
        answer = answer.strip()
        if not answer or len(answer) > MAX_ANSWER:
            context["error"] = f"Write an answer (at most {MAX_ANSWER} characters)."
            return render(request, "hitl/email_action.html", context, status=400)
    try:
        decided = email_links.email_link_use(
            token=token,
            session_user=request.user,
            args=answer or None,
            override_claim=request.POST.get("override_claim") == "1",
        )
    except ServiceError as exc:
        context["error"] = exc.message
        row.refresh_from_db()
        return render(request, "hitl/email_action.html", context, status=exc.status_code)
    context.update(
        done=DONE.get(link.response_type, "Done"),
        progress=decided.progress,
        undo=decided.row.undo_until is not None,
        used=True,
    )
    return render(request, "hitl/email_action.html", context)


@allows_anonymous
@require_POST
def email_action_undo(request, token: str):
    """Take back what the link decided, within the grace period."""
    try:
        email_links.email_link_undo(token=token, session_user=request.user)
    except ServiceError as exc:
        return _refusal(request, exc, token)
    return render(request, "hitl/email_action.html", {"undone": True, "token": token})


@login_required
@require_POST
def notification_test(request):
    """Send a test e-mail to the address my notifications use."""
    address = request.user.email
    if not address:
        messages.error(request, "Your account has no e-mail address; ask an admin to set one.")
        return redirect("notify-preferences")
    try:
        send_mail(
            "[HITL] Test message",
            "This is a test from HITL: notifications about items waiting for your review "
            f"reach this address.\n\n{settings.HITL_PUBLIC_URL}{reverse('notify-preferences')}\n",
            None,
            [address],
            fail_silently=False,
        )
    except (smtplib.SMTPException, OSError) as exc:
        messages.error(request, f"Could not send to {address}: {type(exc).__name__}: {exc}")
        return redirect("notify-preferences")
    messages.success(request, f"Test message sent to {address}.")
    return redirect("notify-preferences")
