"""The audit trail: one append-only event per transition, and the reads that show it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from hitl.core.errors import error_headline
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread

Kind = AuditEvent.Kind


def _jsonable(data: dict[str, Any] | None) -> dict[str, Any]:
    # UUIDs, datetimes and decimals become strings; the row is JSON forever after.
    return json.loads(json.dumps(data or {}, cls=DjangoJSONEncoder))


def audit_event(
    *,
    kind: str,
    thread: Thread | Any | None = None,
    run: Run | Any | None = None,
    interrupt: HumanInterrupt | Any | None = None,
    actor=None,
    actor_id: int | None = None,
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Build (not save) one audit event; `audit_record` or `audit_bulk` appends it.

    `thread`, `run` and `interrupt` may be a row or its id; ids stand in for rows the
    caller has not loaded.
    """
    if kind not in Kind.values:
        raise ValueError(f"Unknown audit event kind {kind!r}.")
    thread_id = getattr(thread, "pk", thread)
    if thread_id is None:
        thread_id = getattr(interrupt, "thread_id", None) or getattr(run, "thread_id", None)
    if actor is not None:
        actor_id = actor.pk if actor.is_authenticated else None
    return AuditEvent(
        kind=kind,
        thread_id=thread_id,
        run_id=getattr(run, "pk", run),
        interrupt_id=getattr(interrupt, "pk", interrupt),
        actor_id=actor_id,
        data=_jsonable(data),
    )


def audit_record(**fields: Any) -> AuditEvent:
    """Append one audit event; call it inside the transaction that makes the change."""
    event = audit_event(**fields)
    event.save()
    return event


def audit_bulk(events: list[AuditEvent]) -> None:
    """Append several audit events in one INSERT (same transaction rule)."""
    AuditEvent.objects.bulk_create(events)


def error_summary(error: str) -> str:
    """A failure as the trail shows it: the exception type and message, no traceback."""
    return error_headline(error)[:1000]


def answer_data(row: HumanInterrupt) -> dict[str, Any]:
    """An answer as the trail keeps it: the proposal and the answer side by side."""
    answer = row.response_args
    data: dict[str, Any] = {
        "response_type": row.response_type,
        "action": row.action,
        "group": group_name(row.reviewer_group),
        "proposed": {"action": row.action, "args": row.args},
        "answer": answer,
    }
    if row.response_type == HumanInterrupt.ResponseType.EDIT and isinstance(answer, dict):
        data["edited_args"] = answer.get("args")
    if row.responded_at and row.created_at:
        data["wait_seconds"] = round((row.responded_at - row.created_at).total_seconds(), 3)
    return data


def group_name(group) -> str | None:
    return group.name if group is not None else None


def interrupt_summary(row: HumanInterrupt) -> dict[str, Any]:
    """What an interrupt proposed, as the audit trail keeps it."""
    return {
        "interrupt_id": row.interrupt_id,
        "position": row.position,
        "kind": row.kind,
        "action": row.action,
        "args": row.args,
        "group": group_name(row.reviewer_group),
        "expires_at": row.expires_at,
    }


def interrupt_created_data(row: HumanInterrupt) -> dict[str, Any]:
    """An `interrupt.created` event's data, as stored."""
    return _jsonable(interrupt_summary(row))


# --- reads ---------------------------------------------------------------------------


@dataclass
class AuditEntry:
    """One line of a thread's audit trail, ready for a template."""

    event: AuditEvent
    kind: str
    label: str
    created_at: datetime
    actor: str
    summary: str
    proposed: str | None = None
    answer: str | None = None
    # The page shows this entry's text elsewhere (a failed run's banner): said once.
    shown_above: bool = False


def _pretty(value: Any) -> str:
    # In the graph's key order (the data column keeps it), not alphabetical.
    return json.dumps(value, indent=2, ensure_ascii=False)


VIA = {"slack": "Slack", "email": "e-mail"}


def _via(data: dict[str, Any]) -> str:
    """The words "via Slack" for an answer given outside the browser and the API."""
    via = data.get("via")
    return f" via {VIA.get(via, via)}" if via else ""


def _summary(event: AuditEvent) -> str:
    data = event.data or {}
    kind = event.kind
    if kind == Kind.INTERRUPT_CREATED:
        return f"{data.get('action') or data.get('kind', 'request')} for {data.get('group') or '—'}"
    if kind == Kind.INTERRUPT_ASSIGNED:
        source = f"from {data['from']} " if data.get("from") else ""
        return f"{source}to {data.get('to') or '—'}" + (
            f" ({data['reason']})" if data.get("reason") else ""
        )
    if kind == Kind.INTERRUPT_ANSWERED:
        grace = (
            f" (with a {data['grace_seconds']:g} s undo window)"
            if data.get("grace_seconds")
            else ""
        )
        by_rule = f" by rule {data['rule']} v{data.get('rule_version')}" if data.get("rule") else ""
        return (
            f"{data.get('response_type', '?')} on {data.get('action') or 'request'}{by_rule}"
            f"{_via(data)}{grace}"
        )
    if kind == Kind.INTERRUPT_APPROVED:
        if data.get("vote") == "reject":
            return f"{data.get('response_type', 'reject')}{_via(data)} (counted as a refusal; still open)"
        edited = " with edited args (earlier approvals reset)" if data.get("edited") else ""
        return (
            f"approval {data.get('approvals', '?')} of {data.get('required', '?')} "
            f"on {data.get('action') or 'request'}{edited}{_via(data)}"
        )
    if kind == Kind.INTERRUPT_RULE_FAILED:
        return (
            f"rule {data.get('rule')} v{data.get('rule_version')} failed: {data.get('error', '')}"[
                :300
            ]
            + " (left to people)"
        )
    if kind == Kind.INTERRUPT_UNDONE:
        return f"{data.get('response_type', '?')} undone; pending again"
    if kind == Kind.INTERRUPT_EXPIRED:
        outcome = data.get("response_type")
        return f"auto-{outcome}" if outcome else "expired without an answer"
    if kind == Kind.INTERRUPT_ESCALATED:
        return f"from {data.get('from') or '—'} to {data.get('to') or '—'}"
    if kind in (Kind.RUN_STARTED, Kind.RUN_RETRIED):
        bits = [
            data.get("run_kind") or "",
            f"attempt {data['attempt']}" if "attempt" in data else "",
        ]
        if data.get("reason"):
            bits.append(data["reason"])
        return ", ".join(b for b in bits if b)
    if kind == Kind.RUN_FINISHED:
        return str(data.get("status", ""))
    if kind == Kind.RUN_FAILED:
        return str(data.get("error", ""))[:200]
    if kind == Kind.THREAD_FORKED:
        edited = data.get("edited") or []
        return f"fork from checkpoint …{str(data.get('checkpoint_id', ''))[-8:]}" + (
            f", state edited ({', '.join(edited)})" if edited else ""
        )
    if kind == Kind.THREAD_STATE_UPDATED:
        return f"state updated as {data.get('as_node') or 'the last node'}"
    if kind == Kind.THREAD_COPIED:
        return f"copy of thread {data.get('source_thread_id', '')}"
    return str(data.get("note", ""))[:200]  # claims and snoozes say it in words


def audit_entry(event: AuditEvent) -> AuditEntry:
    data = event.data or {}
    proposed = answer = None
    if event.kind in (Kind.INTERRUPT_ANSWERED, Kind.INTERRUPT_EXPIRED):
        if "proposed" in data:
            proposed = _pretty(data["proposed"])
        if data.get("answer") is not None:
            answer = _pretty(data["answer"])
    return AuditEntry(
        event=event,
        kind=event.kind,
        label=event.get_kind_display(),
        created_at=event.created_at,
        actor=event.actor.get_username()
        if event.actor_id and event.actor
        else (f"rule {data['rule']} v{data.get('rule_version')}" if data.get("rule") else "system"),
        summary=_summary(event),
        proposed=proposed,
        answer=answer,
    )


def audit_for_thread(thread: Thread | Any, *, limit: int = 500) -> list[AuditEntry]:
    """A thread's audit trail, oldest first (the latest `limit` events)."""
    thread_id = getattr(thread, "pk", thread)
    events = list(
        AuditEvent.objects.filter(thread_id=thread_id)
        .select_related("actor")
        .order_by("-created_at", "-id")[:limit]
    )
    return [audit_entry(event) for event in reversed(events)]
