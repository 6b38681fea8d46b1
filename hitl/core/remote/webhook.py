"""The deployment's run webhooks: a resume run HITL starts there calls back when it ends,
so the mirror follows at once instead of at the next poll.

The call only says which thread to look at: its state is read back through the API, so
a forged body changes nothing. Its URL carries a token derived from SECRET_KEY.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

from hitl.core.errors import Invalid, NotFound, load_json
from hitl.core.models import RemoteDeployment, RemoteThread
from hitl.core.remote.mirror import thread_refresh

MAX_BODY = 256 * 1024


def webhook_token(deployment: RemoteDeployment) -> str:
    message = f"hitl-remote-webhook:{deployment.pk}:{deployment.name}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:40]


def webhook_url(deployment: RemoteDeployment) -> str | None:
    """Where the deployment calls back when a run HITL started there ends (None: off)."""
    if not settings.HITL_REMOTE_WEBHOOKS:
        return None
    return (
        f"{settings.HITL_PUBLIC_URL}/remote/{deployment.name}/webhook/{webhook_token(deployment)}/"
    )


def webhook_receive(*, name: str, token: str, body: bytes) -> int:
    """Follow the thread a run webhook names; returns the rows that made (new pauses)."""
    deployment = RemoteDeployment.objects.filter(name=name, enabled=True).first()
    if deployment is None or not hmac.compare_digest(token, webhook_token(deployment)):
        raise NotFound("No such webhook.")
    if len(body) > MAX_BODY:
        raise Invalid("The webhook body is too large.")
    # Bounded and checked: a NUL, a lone surrogate or deep nesting is a 400, never a query.
    payload = load_json(body or b"null", "The webhook body")
    thread_id = payload.get("thread_id") if isinstance(payload, dict) else None
    if not isinstance(thread_id, str) or not thread_id or len(thread_id) > 64:
        raise Invalid("The webhook body names no thread_id.")
    if not RemoteThread.objects.filter(deployment=deployment, remote_thread_id=thread_id).exists():
        return 0  # not mirrored here: the poll finds it if it ever needs a person
    return thread_refresh(deployment, thread_id)
