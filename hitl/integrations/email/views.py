"""One-click decisions from an e-mail: the link shows the item and one button to confirm.

A GET never decides (mail scanners fetch every link); the POST of the confirmation page
does, as the link's recipient, through core's email_link_use. Also the preferences page's
"send me a test e-mail".
"""

from __future__ import annotations

import smtplib
from urllib.parse import parse_qsl

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from hitl.core.access.links import link_token
from hitl.core.access.summary import item_summary
from hitl.core.decisions import email_links
from hitl.core.decisions.claims import ClaimHeld, active_claim
from hitl.core.decisions.quorum import approve_refusal
from hitl.core.errors import ServiceError
from hitl.core.models import HumanInterrupt
from hitl.integrations.email import transport
from hitl.review import rendering
from hitl.review.sessions import allows_anonymous

MAX_ANSWER = 20_000
DONE = {"accept": "Approved", "ignore": "Ignored", "response": "Answer sent"}


def _form_is_utf8(request) -> bool:
    """False for a form body whose fields are not UTF-8 (a lone surrogate's bytes, say).

    Django decodes them with replacement characters: an answer would be stored garbled.
    """
    if request.content_type != "application/x-www-form-urlencoded":
        return True
    try:
        parse_qsl(request.body.decode("ascii"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def _approve_refused(link, row: HumanInterrupt) -> str:
    """Why this Approve link would be refused (four-eyes), so the page does not offer it."""
    if link.response_type != "accept" or row.status != HumanInterrupt.Status.PENDING:
        return ""
    return approve_refusal(row, link.user)


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
        "refused": _approve_refused(link, row),
    }
    if request.method == "GET":
        return render(request, "hitl/email_action.html", context)
    if not _form_is_utf8(request):
        context["error"] = "The form was not sent as UTF-8; reload the page and try again."
        return render(request, "hitl/email_action.html", context, status=400)
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
    except ClaimHeld as exc:
        context["error"] = (
            f"Not decided: {exc.holder} is on it (until {exc.until:%H:%M} UTC). "
            "To decide all the same, tick “Decide anyway” and confirm again."
        )
        row.refresh_from_db()  # the claim may be newer than the page's first read
        context["claim"] = active_claim(row)
        return render(request, "hitl/email_action.html", context, status=exc.status_code)
    except ServiceError as exc:
        context["error"] = exc.message
        row.refresh_from_db()
        context["refused"] = _approve_refused(link, row)
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
        transport.send_test(address)
    except (smtplib.SMTPException, OSError) as exc:
        messages.error(request, f"Could not send to {address}: {type(exc).__name__}: {exc}")
        return redirect("notify-preferences")
    messages.success(request, f"Test message sent to {address}.")
    return redirect("notify-preferences")
