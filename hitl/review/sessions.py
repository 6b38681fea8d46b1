"""Expired sessions and stale forms, said in words instead of a redirect to a POST URL.

- A reviewer page asked for JSON (the inbox's quick keys, a page's resync) by someone
  no longer logged in answers 401 with a message and where to log in.
- A form posted after the session ended goes to the login page, which then returns to
  the page the form was on (the POST URL itself would answer 405 to a GET); the page's
  script has kept what was typed (`static/hitl/session.js`).
- A CSRF failure renders a page that explains it (or JSON for scripts).
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.decorators import sync_and_async_middleware
from django.utils.http import url_has_allowed_host_and_scheme

EXPIRED = "Your session has expired: log in again. Nothing was sent."
EXPIRED_FORM = (
    "Your session expired before that was sent. Log in again: what you typed is kept on the page."
)
STALE = "This page is out of date (its security token no longer matches): reload it and try again."


def wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def page_you_were_on(request: HttpRequest) -> str:
    """The same-site page a request came from (path and query), or ''."""
    referer = request.headers.get("Referer", "")
    if not referer or not url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return ""
    parts = urlsplit(referer)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def login_url(next_url: str) -> str:
    base = reverse(settings.LOGIN_URL)
    return f"{base}?{urlencode({'next': next_url})}" if next_url else base


def allows_anonymous(view):
    """Mark a reviewer page that answers anonymous visitors itself (an e-mail's link)."""
    view.allows_anonymous = True
    return view


def _is_reviewer_page(view) -> bool:
    if getattr(view, "allows_anonymous", False):
        return False
    module = getattr(view, "__module__", "")
    if module == "hitl.review.sso":  # the login pages: for anonymous users by design
        return False
    return module.startswith("hitl.review.") or module in (
        "hitl.ops.thread_actions",
        "hitl.integrations.email.views",  # the preferences page's test mail
    )


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """The answer to an anonymous call on a reviewer page, or None to let it through."""
    if wants_json(request):
        back = page_you_were_on(request) or request.get_full_path()
        return JsonResponse(
            {"error": EXPIRED, "reason": "session", "login": login_url(back)}, status=401
        )
    if request.method == "POST":
        # Nothing is changed here, so no CSRF check is needed to refuse it.
        messages.warning(request, EXPIRED_FORM)
        return redirect(login_url(page_you_were_on(request) or reverse("home")))
    return None


@sync_and_async_middleware
def session_expiry_middleware(get_response):
    """Answer an anonymous JSON call or form post to a reviewer page in words (before
    CSRF's check and the view's own login redirect). It looks at the view Django has
    already resolved, so other requests (the APIs, static files) pass without a second
    URL lookup or a session read."""
    if iscoroutinefunction(get_response):

        async def process_view(request, view, args, kwargs):
            if not _is_reviewer_page(view):
                return None
            # The session is read on the request's thread, where the page's view reads it.
            signed_in = await sync_to_async(lambda: request.user.is_authenticated)()
            return None if signed_in else _refusal(request)

        async def middleware(request: HttpRequest) -> HttpResponse:
            return await get_response(request)

    else:

        def process_view(request, view, args, kwargs):
            if not _is_reviewer_page(view) or request.user.is_authenticated:
                return None
            return _refusal(request)

        def middleware(request: HttpRequest) -> HttpResponse:
            return get_response(request)

    middleware.process_view = process_view
    return middleware


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: a stale or missing token, explained."""
    back = page_you_were_on(request)
    if wants_json(request):
        anonymous = not request.user.is_authenticated
        return JsonResponse(
            {
                "error": EXPIRED if anonymous else STALE,
                "reason": "session" if anonymous else "csrf",
                "login": login_url(back or "/") if anonymous else "",
            },
            status=403,
        )
    return render(request, "csrf_failure.html", {"back": back}, status=403)
