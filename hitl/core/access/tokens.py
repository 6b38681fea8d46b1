"""A user's own API tokens: list them and revoke one (the keys themselves are never stored)."""

from __future__ import annotations

from django.db.models import QuerySet

from hitl.core.errors import NotFound
from hitl.core.models import ApiToken


def api_token_list_for_user(user) -> QuerySet[ApiToken]:
    """The user's tokens, newest first."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-pk")


def api_token_revoke(*, user, token_id: int) -> ApiToken:
    """Delete one of the user's own tokens; another user's token is NotFound.

    Deleting takes effect at once in this process and within the token cache's TTL
    elsewhere (hitl/api/tokens.py).
    """
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is None:
        raise NotFound("No such token.")
    token.delete()
    return token
