"""Mirror a deployment's interrupted threads into Threads, Runs and HumanInterrupt rows.

A remote pause becomes a local Run that ended interrupted, recorded by the worker's own
`run_finish`: the rows have the contract of local ones (HumanInterrupt lists, the
middleware's action_requests, raw values) and rules, four-eyes, expiry, notifications
and the audit trail apply as they do to a local pause.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from hitl.core.access.permissions import group_named
from hitl.core.db import locked_reads
from hitl.core.models import (
    REMOTE_GRAPH_PREFIX,
    HumanInterrupt,
    RemoteDeployment,
    RemoteThread,
    Run,
    Thread,
)
from hitl.core.remote.client import client_for, deployment_health, fault_of
from hitl.core.runs.pauses import interrupts_withdraw
from hitl.core.runs.start import announce_thread
from hitl.core.worker import pauses_record

log = logging.getLogger(__name__)

# Threads read per search page, and pages read per poll (the rest waits for the next).
PAGE = 100
MAX_PAGES = 10
# The remote thread's status -> the local thread's, once nothing is pending here.
# A mirrored thread the deployment no longer lists is synced with this status.
DELETED = "deleted"
_SETTLED = {
    "idle": Thread.Status.DONE,
    "error": Thread.Status.ERROR,
    "busy": Thread.Status.BUSY,
    DELETED: Thread.Status.IDLE,
}


def remote_interrupts(remote: dict[str, Any]) -> list[tuple[str, Any]]:
    """(interrupt id, value) of every pending interrupt of a thread as its API returns it:
    `interrupts` is {task id: [{id, value}]} on a thread, [{id, value}] on a state."""
    found = remote.get("interrupts") or {}
    items = [i for task in found.values() for i in task] if isinstance(found, dict) else found
    return [(str(i["id"]), i.get("value")) for i in items if isinstance(i, dict) and i.get("id")]


def _worker(deployment: RemoteDeployment) -> str:
    return f"remote:{deployment.name}"


def _graph_name(deployment: RemoteDeployment, graph_id: str) -> str:
    return f"{REMOTE_GRAPH_PREFIX}{deployment.name}/{graph_id}"[:100]


def _link(deployment: RemoteDeployment, remote: dict[str, Any]) -> RemoteThread:
    """The local mirror of a remote thread, made on first sight."""
    meta = remote.get("metadata") or {}
    graph_id = str(meta.get("graph_id") or meta.get("assistant_id") or "")
    link = RemoteThread.objects.filter(
        deployment=deployment, remote_thread_id=remote["thread_id"]
    ).first()
    if link is not None:
        return link
    with transaction.atomic():
        thread = Thread.objects.create(
            graph=_graph_name(deployment, graph_id),
            title=f"{deployment.name}: {graph_id or 'thread'} {remote['thread_id'][:8]}",
            reviewer_group=deployment.reviewer_group,
            metadata={"remote": {"deployment": deployment.name, "thread_id": remote["thread_id"]}},
        )
        link, made = RemoteThread.objects.get_or_create(
            deployment=deployment,
            remote_thread_id=remote["thread_id"],
            defaults={
                "thread": thread,
                "assistant_id": str(meta.get("assistant_id") or graph_id)[:100],
                "graph_id": graph_id[:100],
            },
        )
        if not made:  # another poll made it first
            transaction.set_rollback(True)
    return link


def thread_sync(deployment: RemoteDeployment, remote: dict[str, Any]) -> int:
    """Bring the mirror of one remote thread up to date; returns the rows it made.

    New interrupt ids become a paused Run with its rows (never twice: the thread's lock
    serializes polls and ids already here are skipped). Pending rows whose interrupt
    the remote thread no longer has were decided elsewhere and are withdrawn, unless a
    decision of ours waits for delivery (the delivery then finds the conflict).
    """
    status = remote.get("status") or ""
    pending = remote_interrupts(remote)
    meta = remote.get("metadata") or {}
    link = RemoteThread.objects.filter(
        deployment=deployment, remote_thread_id=remote["thread_id"]
    ).first()
    if link is None:
        if status != "interrupted" or not pending:
            return 0
        if not deployment.watches(
            assistant_id=str(meta.get("assistant_id") or ""),
            graph_id=str(meta.get("graph_id") or ""),
        ):
            return 0
        link = _link(deployment, remote)
    now = timezone.now()
    owner = _worker(deployment)
    with transaction.atomic():
        thread = locked_reads.thread_locked(link.thread_id)
        if thread is None:
            return 0
        rows = list(HumanInterrupt.objects.filter(thread_id=thread.pk))
        known = {row.interrupt_id for row in rows}
        live = {interrupt_id for interrupt_id, _ in pending}
        waiting = Run.objects.filter(thread_id=thread.pk).active().exists()
        gone = [
            row
            for row in rows
            if row.status == HumanInterrupt.Status.PENDING and row.interrupt_id not in live
        ]
        if gone and not waiting:
            reason = "remote thread deleted" if status == DELETED else "answered elsewhere"
            interrupts_withdraw(
                thread=thread, rows=gone, reason=reason, data={"deployment": deployment.name}
            )
        RemoteThread.objects.filter(pk=link.pk).update(
            remote_status=status[:16], remote_updated_at=_when(remote.get("updated_at"))
        )
        new = [(i, v, None) for i, v in pending if i not in known]
        if not new or status != "interrupted":
            settled = _SETTLED.get(status)
            still = any(r.status == HumanInterrupt.Status.PENDING for r in rows if r not in gone)
            # A refused delivery left the thread in error: it stays so until a new pause.
            keep_error = thread.status == Thread.Status.ERROR and settled == Thread.Status.DONE
            if (
                settled
                and not waiting
                and not still
                and thread.status != settled
                and not keep_error
            ):
                thread.status = settled
                thread.save(update_fields=["status", "updated_at"])
                announce_thread(thread)
            return 0
        # The remote pause, as a run this deployment "ran": run_finish records its rows.
        run = Run.objects.create(
            thread=thread,
            kind=Run.Kind.START if not rows else Run.Kind.RESUME,
            status=Run.Status.RUNNING,
            lease_owner=owner,
            lease_expires_at=now + timedelta(minutes=5),
            started_at=now,
            metadata={
                "remote": {"deployment": deployment.name, "thread_id": link.remote_thread_id}
            },
        )
        pauses_record.run_finish(
            run_id=run.pk, worker=owner, interrupts=new, result=None, thread_id=thread.pk
        )
    return sum(1 for _ in new)


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    return parse_datetime(value) if isinstance(value, str) else None


def _interrupted_since(client: Any, cursor: datetime | None) -> list[dict[str, Any]]:
    """Interrupted threads updated at or after `cursor`, oldest first."""
    found: list[dict[str, Any]] = []
    for page in range(MAX_PAGES):
        batch = client.threads.search(
            status="interrupted",
            limit=PAGE,
            offset=page * PAGE,
            sort_by="updated_at",
            sort_order="desc",
        )
        for remote in batch:
            when = _when(remote.get("updated_at"))
            if cursor is not None and when is not None and when < cursor:
                return found[::-1]
            found.append(remote)
        if len(batch) < PAGE:
            break
    return found[::-1]


def _with_interrupts(client: Any, remote: dict[str, Any]) -> dict[str, Any]:
    """A thread whose listing left out its interrupts gets them from its state."""
    if remote.get("status") == "interrupted" and not remote_interrupts(remote):
        state = client.threads.get_state(remote["thread_id"])
        remote = {**remote, "interrupts": state.get("interrupts") or []}
    return remote


def thread_refresh(deployment: RemoteDeployment, remote_thread_id: str) -> int:
    """Read one remote thread through the API and sync its mirror (a webhook's follow-up)."""
    try:
        with client_for(deployment) as client:
            remote = _with_interrupts(client, client.threads.get(remote_thread_id))
    except Exception as exc:
        fault = fault_of(exc)
        if fault is None:
            raise
        deployment_health(deployment, error=fault[1])
        return 0
    return thread_sync(deployment, remote)


def deployment_poll(deployment: RemoteDeployment) -> dict[str, int]:
    """One poll: mirror newly interrupted threads, then follow the mirrored open ones.

    A deployment that cannot be reached (or refuses the key) is marked on its row and
    polled again next time.
    """
    try:
        with client_for(deployment) as client:
            made, followed = _poll(deployment, client)
    except Exception as exc:
        fault = fault_of(exc)
        if fault is None:
            raise
        deployment_health(deployment, error=fault[1])
        return {"made": 0, "followed": 0, "failed": 1}
    deployment_health(deployment)
    return {"made": made, "followed": followed, "failed": 0}


def _poll(deployment: RemoteDeployment, client: Any) -> tuple[int, int]:
    """(rows made, threads followed): new interrupted threads from the cursor on, then
    the mirrored threads still open here (paused, or busy after a delivered decision)."""
    made = followed = 0
    found = _interrupted_since(client, deployment.cursor)
    for remote in found:
        made += thread_sync(deployment, _with_interrupts(client, remote))
    newest = max((_when(r.get("updated_at")) for r in found), default=None, key=_key)
    if newest is not None and (deployment.cursor is None or newest > deployment.cursor):
        RemoteDeployment.objects.filter(pk=deployment.pk).update(cursor=newest)
        deployment.cursor = newest
    open_ids = list(
        RemoteThread.objects.filter(
            deployment=deployment,
            thread__status__in=[Thread.Status.INTERRUPTED, Thread.Status.BUSY],
        )
        # Those just read from the search are up to date already.
        .exclude(remote_thread_id__in=[remote["thread_id"] for remote in found])
        .values_list("remote_thread_id", flat=True)[: PAGE * MAX_PAGES]
    )
    for start in range(0, len(open_ids), PAGE):
        ids = open_ids[start : start + PAGE]
        listed = client.threads.search(ids=ids, limit=len(ids))
        for remote in listed:
            followed += 1
            made += thread_sync(deployment, _with_interrupts(client, remote))
        for missing in set(ids) - {remote["thread_id"] for remote in listed}:
            # Deleted there: nothing of it is left to decide.
            thread_sync(deployment, {"thread_id": missing, "status": DELETED, "interrupts": {}})
    return made, followed


def _key(when: datetime | None) -> float:
    return when.timestamp() if when is not None else 0.0


def deployments_from_settings() -> None:
    """Create or update the deployments declared in HITL_REMOTE_DEPLOYMENTS (written only
    when something differs: this runs before every poll)."""
    for spec in settings.HITL_REMOTE_DEPLOYMENTS:
        group = group_named(spec["reviewer_group"]) if spec.get("reviewer_group") else None
        wanted = {
            "base_url": spec["url"],
            "api_key": spec.get("api_key") or "",
            "graphs": list(spec.get("graphs") or []),
            "reviewer_group": group,
            "enabled": spec.get("enabled", True),
            "from_settings": True,
        }
        deployment = RemoteDeployment.objects.filter(name=spec["name"]).first()
        if deployment is None:
            RemoteDeployment.objects.create(name=spec["name"], **wanted)
        elif any(getattr(deployment, k) != v for k, v in wanted.items()):
            for name, value in wanted.items():
                setattr(deployment, name, value)
            deployment.save()


def deployments_poll() -> dict[str, dict[str, int]]:
    """Poll every enabled deployment (beat calls this every HITL_REMOTE_POLL_SECONDS)."""
    deployments_from_settings()
    found = {}
    for deployment in RemoteDeployment.objects.filter(enabled=True).select_related(
        "reviewer_group"
    ):
        try:
            found[deployment.name] = deployment_poll(deployment)
        except Exception:  # one deployment's surprise must not stop the others' polls
            log.exception("polling remote deployment %s failed", deployment.name)
            found[deployment.name] = {"made": 0, "followed": 0, "failed": 1}
    return found
