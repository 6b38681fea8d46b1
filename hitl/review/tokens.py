"""The "API tokens" page: a user lists and revokes their own tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from hitl.core.access.tokens import api_token_list_for_user, api_token_revoke
from hitl.core.errors import NotFound


@login_required
@require_GET
def token_list(request):
    return render(request, "hitl/tokens.html", {"tokens": api_token_list_for_user(request.user)})


@login_required
@require_POST
def token_revoke(request, token_id: int):
    try:
        token = api_token_revoke(user=request.user, token_id=token_id)
    except NotFound:
        raise Http404("No such token.") from None
    messages.success(request, f"Token {token.prefix}… ({token.name or 'unnamed'}) was revoked.")
    return redirect("tokens")
