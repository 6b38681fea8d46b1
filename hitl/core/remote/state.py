"""A mirrored thread's state and history, read through its deployment's API."""

from __future__ import annotations

import json
import logging
from typing import Any

from hitl.core.models import REMOTE_GRAPH_PREFIX, RemoteThread, Run, Thread
from hitl.core.remote.client import Fault, client_for, fault_of
from hitl.core.remote.deliver import PENDING_DELIVERY

log = logging.getLogger(__name__)


class RemoteUnreadable(Exception):
    """The deployment could not be asked (the message says why, without the key)."""


def remote_link(thread: Thread) -> RemoteThread | None:
    if not thread.graph.startswith(REMOTE_GRAPH_PREFIX):
        return None
    return RemoteThread.objects.select_related("deployment").filter(thread_id=thread.pk).first()


def _call(link: RemoteThread, method: str, **kwargs: Any) -> Any:
    if link.deployment.last_error.startswith(Fault.UNREACHABLE):
        # Known to be away: a page must not wait for connections to time out.
        raise RemoteUnreadable(f"{link.deployment.name}: {link.deployment.last_error}")
    try:
        with client_for(link.deployment) as client:
            return getattr(client.threads, method)(link.remote_thread_id, **kwargs)
    except Exception as exc:
        fault = fault_of(exc)
        if fault is None:
            raise
        raise RemoteUnreadable(f"{link.deployment.name}: {fault[1]}") from None


def remote_values(link: RemoteThread) -> dict[str, Any]:
    """The remote thread's current state values."""
    values = _call(link, "get_state").get("values")
    return values if isinstance(values, dict) else {"value": values}


def remote_checkpoints(link: RemoteThread, limit: int = 50) -> list[dict[str, Any]]:
    """The remote thread's checkpoints, newest first, shaped as the local history's."""
    out = []
    for state in _call(link, "get_history", limit=limit):
        metadata = state.get("metadata") or {}
        checkpoint = state.get("checkpoint") or {}
        values = state.get("values")
        out.append(
            {
                "checkpoint_id": checkpoint.get("checkpoint_id") or state.get("checkpoint_id"),
                "step": metadata.get("step"),
                "source": metadata.get("source"),
                "run_id": metadata.get("run_id"),
                "next": list(state.get("next") or []),
                "created_at": state.get("created_at"),
                "values": values,
                "values_json": json.dumps(values, indent=2, default=str),
            }
        )
    return out


def delivery_pending(thread: Thread) -> Run | None:
    """The decision run waiting to reach the deployment (its error says why), if any."""
    return (
        thread.runs.filter(
            kind=Run.Kind.RESUME,
            status__in=[Run.Status.QUEUED, Run.Status.RUNNING],
            error__startswith=PENDING_DELIVERY,
        )
        .order_by("-created_at")
        .first()
    )
