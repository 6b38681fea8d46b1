"""One-click decisions in e-mails: a random, single-use, short-lived link per allowed decision.

The token is a credential: it is handed out once (into the e-mail) and only its SHA-256
is stored, so neither the database nor admin can give it back. A link names one
EmailActionLink row: one interrupt, one recipient, one decision type.
Opening it only shows a confirmation (mail scanners fetch every link); the confirming
POST decides through `interrupt_answer` as the recipient, and marks the link used in
the same transaction, so it works once, and not at all when the decision is refused.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hitl.core.decisions.answer import Answer, Reply, interrupt_answer, interrupt_undo
from hitl.core.decisions.quorum import approve_refusal
from hitl.core.errors import Forbidden, NotFound, ServiceError
from hitl.core.models import EmailActionLink, HumanInterrupt

# Longer than any token this module makes: refused before it is hashed.
MAX_TOKEN = 100
LABELS = {"accept": "Approve", "ignore": "Ignore", "response": "Respond"}


class LinkGone(ServiceError):
    """A genuine link that expired or was used already."""

    status_code = 410


def allowed_types(row: HumanInterrupt, user=None) -> list[str]:
    """The decisions an e-mail offers for the row (edit stays a link to the card); without
    Approve for a `user` whose approval would be refused (four-eyes)."""
    wanted = [
        ("accept", row.allow_accept and not approve_refusal(row, user)),
        ("ignore", row.allow_ignore),
        ("response", row.allow_respond),
    ]
    return [kind for kind, allowed in wanted if allowed]


def email_links_create(
    *, row: HumanInterrupt, user, now: datetime | None = None
) -> list[tuple[str, str]]:
    """One link per allowed decision for `user`: [(response_type, token)].

    The tokens exist only in the returned list: the rows keep their hashes.
    """
    now = now or timezone.now()
    expires = now + timedelta(seconds=settings.HITL_EMAIL_LINK_MAX_AGE)
    made = []
    for kind in allowed_types(row, user):
        token = secrets.token_urlsafe(32)
        link = EmailActionLink(
            interrupt=row,
            user=user,
            response_type=kind,
            expires_at=expires,
            token_hash=EmailActionLink.hash_token(token),
        )
        made.append((link, token))
    EmailActionLink.objects.bulk_create([link for link, _ in made])
    return [(link.response_type, token) for link, token in made]


def _link_for(token: Any) -> EmailActionLink | None:
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN:
        return None
    return (
        EmailActionLink.objects.select_related("interrupt__thread", "interrupt__reviewer_group")
        .select_related("user")
        .filter(token_hash=EmailActionLink.hash_token(token))
        .first()
    )


def email_link_get(token: str, *, now: datetime | None = None) -> EmailActionLink:
    """The link a token names; NotFound when unknown, LinkGone when expired or used."""
    link = _link_for(token)
    if link is None:
        raise NotFound("No such link.")
    now = now or timezone.now()
    # The setting caps links already sent too (lowering it takes effect at once).
    max_age = timedelta(seconds=settings.HITL_EMAIL_LINK_MAX_AGE)
    if link.expires_at <= now or link.created_at + max_age <= now:
        raise LinkGone("This link has expired; open the item in HITL instead.")
    return link


def email_link_use(
    *, token: str, session_user=None, args: Any = None, override_claim: bool = False
) -> Answer:
    """Decide what a link offers, as its recipient; the link is used up when it succeeds.

    `session_user`: who is logged in (or None); with HITL_EMAIL_LINK_REQUIRE_LOGIN it
    must be the recipient.
    """
    link = email_link_get(token)
    check_session(link, session_user)
    with transaction.atomic():
        locked = EmailActionLink.objects.select_for_update().get(pk=link.pk)
        if locked.used_at is not None:
            raise LinkGone("This link was used already.")
        if not link.user.is_active:
            raise NotFound("No such link.")
        answer = interrupt_answer(
            interrupt_id=link.interrupt_id,
            user=link.user,
            reply=Reply(
                response_type=link.response_type,
                args=args if link.response_type == "response" else None,
                grace=settings.HITL_UNDO_SECONDS,
                respect_claim=not override_claim,
                via="email",
            ),
            thread_id=link.interrupt.thread_id,
        )
        locked.used_at = timezone.now()
        locked.save(update_fields=["used_at"])
    return answer


def email_link_undo(*, token: str, session_user=None) -> HumanInterrupt:
    """Take back the decision a used link made, within its grace period."""
    link = _link_for(token)
    if link is None or link.used_at is None:
        raise NotFound("No such link.")
    check_session(link, session_user)
    return interrupt_undo(interrupt_id=link.interrupt_id, user=link.user)


def check_session(link: EmailActionLink, session_user) -> None:
    """Refuse a link opened in another user's session, or without one when one is needed."""
    logged_in = session_user is not None and session_user.is_authenticated
    if logged_in and session_user.pk != link.user_id:
        raise Forbidden(
            f"This link was sent to {link.user.get_username()}; you are logged in as "
            f"{session_user.get_username()}."
        )
    if settings.HITL_EMAIL_LINK_REQUIRE_LOGIN and not logged_in:
        raise NotLoggedIn("Log in to use this link.")


class NotLoggedIn(ServiceError):
    status_code = 401


def email_links_prune(now: datetime) -> dict[str, int]:
    """Delete one-click links a day past their expiry: refused anyway, no longer worth a row."""
    pruned, _ = EmailActionLink.objects.filter(expires_at__lt=now - timedelta(days=1)).delete()
    return {"pruned_links": pruned}
