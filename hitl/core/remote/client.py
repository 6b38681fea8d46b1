"""The deployment's API through langgraph_sdk, and what its failures mean."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import langgraph_sdk
from django.conf import settings
from django.utils import timezone
from langgraph_sdk import errors as sdk_errors
from langgraph_sdk.client import SyncLangGraphClient

from hitl.core.models import RemoteDeployment
from hitl.core.net.webhook_urls import DEPLOYMENTS, WebhookNotAllowed, webhook_resolve

log = logging.getLogger(__name__)


# Connection attempts after a refused or timed-out one. langgraph_sdk's own client makes
# five more, 0, 0.5, 1, 2 and 4 s apart: every call to a deployment that is down held its
# worker 7.5 s (37.5 s where connects time out), longer than the 5 s poll. A delivery
# that fails is retried by its task, and the next poll comes anyway.
CONNECT_RETRIES = 1


def client_for(deployment: RemoteDeployment) -> Any:
    """A sync langgraph_sdk client of the deployment (its key as x-api-key).

    Its URL is checked as a webhook's is, with its name resolved now: a name allowed when
    it was saved may point at a private address today. Raises WebhookNotAllowed.
    """
    webhook_resolve(deployment.base_url, DEPLOYMENTS)
    headers = {"User-Agent": f"langgraph-sdk-py/{langgraph_sdk.__version__}"}
    if deployment.api_key:  # no key never falls back to LANGGRAPH_API_KEY of this process
        headers["x-api-key"] = deployment.api_key
    return SyncLangGraphClient(
        httpx.Client(
            base_url=deployment.base_url.rstrip("/"),
            transport=httpx.HTTPTransport(retries=CONNECT_RETRIES),
            timeout=httpx.Timeout(settings.HITL_REMOTE_TIMEOUT, connect=5.0),
            headers=headers,
        )
    )


class Fault:
    """Why a call failed, in words for the admin row, /healthz and the thread page."""

    UNREACHABLE = "unreachable"
    KEY_REFUSED = "key refused"
    CONFLICT = "conflict"
    NOT_FOUND = "not found"
    REFUSED = "refused"
    NOT_ALLOWED = "not allowed"


def fault_of(exc: BaseException) -> tuple[str, str] | None:
    """(kind, message) for a failure of the deployment's API; None for anything else.

    The message never holds the key: only the status and the server's own words.
    """
    if isinstance(exc, WebhookNotAllowed):  # its URL, refused here: nothing was sent
        return Fault.NOT_ALLOWED, f"not allowed: {exc}"[:500]
    if isinstance(exc, sdk_errors.ConflictError):
        return Fault.CONFLICT, f"409: {exc.message}"[:500]
    if isinstance(exc, (sdk_errors.AuthenticationError, sdk_errors.PermissionDeniedError)):
        return Fault.KEY_REFUSED, f"the API key was refused ({exc.response.status_code})"
    if isinstance(exc, sdk_errors.NotFoundError):
        return Fault.NOT_FOUND, f"404: {exc.message}"[:500]
    if isinstance(exc, (sdk_errors.APIConnectionError, httpx.TransportError)):
        return Fault.UNREACHABLE, f"unreachable ({type(exc).__name__})"
    if isinstance(exc, (sdk_errors.InternalServerError, sdk_errors.RateLimitError)):
        return Fault.UNREACHABLE, f"unavailable ({exc.response.status_code})"
    if isinstance(exc, sdk_errors.APIStatusError):
        return Fault.REFUSED, f"{exc.response.status_code}: {exc.message}"[:500]
    if isinstance(exc, httpx.HTTPStatusError):
        return Fault.REFUSED, f"{exc.response.status_code}"
    return None


def deployment_health(deployment: RemoteDeployment, *, error: str = "") -> None:
    """Record the outcome of a call: the admin row and /healthz show it."""
    now = timezone.now()
    fields: dict[str, Any] = {"last_polled_at": now, "last_error": error[:1000]}
    if not error:
        fields["last_ok_at"] = now
    elif error != deployment.last_error:
        log.warning("remote deployment %s: %s", deployment.name, error)
    RemoteDeployment.objects.filter(pk=deployment.pk).update(**fields)
    for name, value in fields.items():
        setattr(deployment, name, value)
