"""Deliver a decision to the remote thread: the resume run of a mirrored thread.

The worker hands such runs here instead of running a graph. An unreachable deployment
(or a refused key) gives the run back to the queue, marked as pending delivery, and the
task retries it: the decision is never lost. A refusal (409: someone resumed the thread
first) ends the run in error, recorded and shown on the thread.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from langgraph_sdk import errors as sdk_errors

from hitl.core.db import run_statements
from hitl.core.live import events
from hitl.core.models import RemoteThread, Run, Thread
from hitl.core.remote.client import Fault, client_for, deployment_health, fault_of
from hitl.core.remote.mirror import remote_interrupts
from hitl.core.remote.webhook import webhook_url
from hitl.core.runs.start import announce_thread
from hitl.core.worker import lease

log = logging.getLogger(__name__)

PENDING_DELIVERY = "pending delivery"


class _Refused(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def _delivered_before(client: Any, link: RemoteThread, run: Run) -> dict[str, Any] | None:
    """The remote run an earlier attempt of `run` made but never recorded, found by the
    hitl_run_id it carries."""
    for made in client.runs.list(link.remote_thread_id, limit=20):
        # LangGraph Server keeps a run's metadata; Aegra only its config.
        config = made.get("config") or (made.get("kwargs") or {}).get("config") or {}
        tags = [made.get("metadata") or {}, config.get("configurable") or {}]
        if any(tag.get("hitl_run_id") == str(run.pk) for tag in tags):
            return made
    return None


def _check_still_pending(client: Any, link: RemoteThread, resume: dict[str, Any]) -> None:
    """Refuse, as the server would with a 409, a resume of interrupts no longer pending:
    LangGraph servers accept such a run and do nothing with the answer."""
    remote = client.threads.get(link.remote_thread_id)
    live = {i for i, _ in remote_interrupts(remote)}
    if remote.get("status") == "interrupted" and not live:
        state = client.threads.get_state(link.remote_thread_id)
        live = {i for i, _ in remote_interrupts(state)}
    gone = sorted(set(resume) - live)
    if gone:
        raise _Refused(
            Fault.CONFLICT,
            f"409: the remote thread was resumed elsewhere first (interrupt {gone[0]} is no "
            f"longer pending there; it is {remote.get('status') or 'unknown'})",
        )


def _create_run(client: Any, link: RemoteThread, run: Run) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "command": {"resume": run.input["resume"]},
        # Finds it again if this attempt dies before recording the delivery (and the
        # remote checkpoints it writes name the HITL run).
        "metadata": {"hitl_run_id": str(run.pk), "hitl_thread_id": str(run.thread_id)},
        "config": {"configurable": {"hitl_run_id": str(run.pk)}},
        # A thread busy with another run refuses (409) instead of queueing ours.
        "multitask_strategy": "reject",
    }
    webhook = webhook_url(link.deployment)
    if webhook:
        kwargs["webhook"] = webhook
    try:
        return client.runs.create(
            link.remote_thread_id, link.assistant_id or link.graph_id, **kwargs
        )
    except (sdk_errors.UnprocessableEntityError, sdk_errors.BadRequestError) as exc:
        if not webhook or "webhook" not in str(exc.message).lower():
            raise
        # The deployment's webhook policy refuses our address (say a loopback one): the
        # resume goes without it, and the poll follows the thread.
        log.warning("%s refused the run webhook (%s)", link.deployment.name, exc.message)
        del kwargs["webhook"]
        return client.runs.create(
            link.remote_thread_id, link.assistant_id or link.graph_id, **kwargs
        )


def resume_deliver(run: Run, *, worker: str) -> tuple[str, float]:
    """Resume the remote thread with the run's answers. Returns (outcome, retry_after)."""
    link = RemoteThread.objects.select_related("deployment").filter(thread_id=run.thread_id).first()
    resume = (run.input or {}).get("resume") or {}
    if link is None or run.kind != Run.Kind.RESUME or not resume:
        lease.run_fail(run_id=run.pk, worker=worker, error="Nothing to deliver to a deployment.")
        return "error", 0.0
    deployment = link.deployment
    try:
        with client_for(deployment) as client:
            try:
                _check_still_pending(client, link, resume)
            except _Refused:
                # Ours, if an earlier attempt sent it and never heard back (it died, or
                # the answer timed out): then it is delivered, not refused.
                made = _delivered_before(client, link, run)
                if made is None:
                    raise
            else:
                made = _create_run(client, link, run)
    except _Refused as refused:
        return _refused(run, worker, deployment.name, refused.message)
    except Exception as exc:
        fault = fault_of(exc)
        if fault is None:
            raise
        kind, message = fault
        # Held, not failed: the operator can fix the key or the allow-list.
        if kind in (Fault.UNREACHABLE, Fault.KEY_REFUSED, Fault.NOT_ALLOWED):
            deployment_health(deployment, error=message)
            return _pending(run, worker, deployment.name, message)
        return _refused(run, worker, deployment.name, message)
    deployment_health(deployment)
    _delivered(run, worker, made)
    log.info("run %s delivered to %s as run %s", run.pk, deployment.name, made.get("run_id"))
    return "delivered", 0.0


def _pending(run: Run, worker: str, name: str, message: str) -> tuple[str, float]:
    """Back to the queue, not spending an attempt; the thread shows it pending delivery."""
    with transaction.atomic():
        lease.run_release(run_id=run.pk, worker=worker)
        Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
            error=f"{PENDING_DELIVERY} to {name}: {message}"
        )
    thread = Thread.objects.filter(pk=run.thread_id).first()
    if thread is not None:  # open pages show the decision waiting
        announce_thread(thread)
    return "retry", settings.HITL_REMOTE_RETRY_SECONDS


def _refused(run: Run, worker: str, name: str, message: str) -> tuple[str, float]:
    """The deployment refused the resume: the run fails with its words, on the trail."""
    lease.run_fail(run_id=run.pk, worker=worker, error=f"refused by {name}: {message}")
    return "refused", 0.0


def _delivered(run: Run, worker: str, made: dict[str, Any]) -> None:
    """The run's job is done; the thread stays busy until the remote thread pauses or ends."""
    with transaction.atomic():
        locked = run_statements.run_end_record(
            run_statements.RunEnding(
                run_id=run.pk,
                thread_id=run.thread_id,
                worker=worker,
                status=Run.Status.SUCCESS,
                thread_status=Thread.Status.BUSY,
                result={"remote_run_id": made.get("run_id")},
                now=timezone.now(),
            )
        )
        if locked is None:
            return
        thread, ended, _ = locked
        Run.objects.filter(pk=ended.pk).update(error="")
        events.emit_run_ended(ended)
        announce_thread(thread, run_ended=True)
