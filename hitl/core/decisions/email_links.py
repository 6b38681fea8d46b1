"""One-click decisions in e-mails: a signed, single-use, short-lived link per allowed decision.

A link names one EmailActionLink row: one interrupt, one recipient, one decision type.
Opening it only shows a confirmation (mail scanners fetch every link); the confirming
POST decides through `interrupt_resolve` as the recipient, and marks the link used in
the same transaction, so it works once, and not at all when the decision is refused.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.utils import timezone

from hitl.core.decisions.answer import Answer, interrupt_resolve, interrupt_undo
from hitl.core.errors import Forbidden, NotFound, ServiceError
from hitl.core.models import EmailActionLink, HumanInterrupt

SALT = "hitl.email.action"
LABELS = {"accept": "Approve", "ignore": "Ignore", "response": "Respond"}


class LinkGone(ServiceError):
    """A genuine link that expired or was used already."""

    status_code = 410


def allowed_types(row: HumanInterrupt) -> list[str]:
    """The decisions an e-mail offers for the row (edit stays a link to the card)."""
    wanted = [
        ("accept", row.allow_accept),
        ("ignore", row.allow_ignore),
        ("response", row.allow_respond),
    ]
    return [kind for kind, allowed in wanted if allowed]


def email_links_create(
    *, row: HumanInterrupt, user, now: datetime | None = None
) -> list[tuple[str, str]]:
    """One link per allowed decision for `user`: [(response_type, token)]."""
    now = now or timezone.now()
    expires = now + timedelta(seconds=settings.HITL_EMAIL_LINK_MAX_AGE)
    made = EmailActionLink.objects.bulk_create(
        [
            EmailActionLink(interrupt=row, user=user, response_type=kind, expires_at=expires)
            for kind in allowed_types(row)
        ]
    )
    return [(link.response_type, link_token(link)) for link in made]


def link_token(link: EmailActionLink) -> str:
    return signing.TimestampSigner(salt=SALT).sign_object({"l": str(link.pk)})


def email_link_get(token: str, *, now: datetime | None = None) -> EmailActionLink:
    """The link a token names; NotFound when forged, LinkGone when expired or used."""
    signer = signing.TimestampSigner(salt=SALT)
    try:
        value = signer.unsign_object(token, max_age=settings.HITL_EMAIL_LINK_MAX_AGE)
    except signing.SignatureExpired:
        raise LinkGone("This link has expired; open the item in HITL instead.") from None
    except (signing.BadSignature, ValueError, UnicodeDecodeError):
        raise NotFound("No such link.") from None
    if not isinstance(value, dict) or not isinstance(value.get("l"), str):
        raise NotFound("No such link.")
    link = (
        EmailActionLink.objects.select_related("interrupt__thread", "interrupt__reviewer_group")
        .select_related("user")
        .filter(pk=value["l"])
        .first()
    )
    if link is None:
        raise NotFound("No such link.")
    if link.expires_at <= (now or timezone.now()):
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
        answer = interrupt_resolve(
            interrupt_id=link.interrupt_id,
            user=link.user,
            response_type=link.response_type,
            args=args if link.response_type == "response" else None,
            thread_id=link.interrupt.thread_id,
            grace=settings.HITL_UNDO_SECONDS,
            respect_claim=not override_claim,
            via="email",
        )
        locked.used_at = timezone.now()
        locked.save(update_fields=["used_at"])
    return answer


def email_link_undo(*, token: str, session_user=None) -> HumanInterrupt:
    """Take back the decision a used link made, within its grace period."""
    signer = signing.TimestampSigner(salt=SALT)
    try:
        value = signer.unsign_object(token)
        link = EmailActionLink.objects.select_related("user").get(
            pk=value["l"], used_at__isnull=False
        )
    except (signing.BadSignature, ValueError, TypeError, KeyError, EmailActionLink.DoesNotExist):
        raise NotFound("No such link.") from None
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
