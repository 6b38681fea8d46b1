"""Signed, expiring deep links to one interrupt, for notifications sent outside the browser.

The token names only the interrupt; opening it still needs a login, and the thread page
still checks that the user may see it. It expires after HITL_NOTIFY_LINK_MAX_AGE seconds.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import signing

SALT = "hitl.notify.link"


class LinkExpired(Exception):
    """A genuine link past its age."""


class LinkInvalid(Exception):
    """A token that was not signed here (or was altered)."""


def link_token(interrupt_id: Any) -> str:
    return signing.TimestampSigner(salt=SALT).sign_object({"i": str(interrupt_id)})


def link_interrupt_id(token: str) -> str:
    """The interrupt id a token names; raises LinkExpired or LinkInvalid."""
    signer = signing.TimestampSigner(salt=SALT)
    try:
        value = signer.unsign_object(token, max_age=settings.HITL_NOTIFY_LINK_MAX_AGE)
    except signing.SignatureExpired:
        raise LinkExpired from None
    except (signing.BadSignature, ValueError, UnicodeDecodeError):
        raise LinkInvalid from None
    if not isinstance(value, dict) or not isinstance(value.get("i"), str):
        raise LinkInvalid
    return value["i"]
