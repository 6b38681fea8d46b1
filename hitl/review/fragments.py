"""Server-rendered HTML fragments, shared by the pages and the live WebSocket messages.

Fragments rendered for a socket have no request, so forms in them carry an empty
CSRF field that the page script fills from the page's own token.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone

from hitl.core.access.permissions import (
    thread_pending_interrupts,
    thread_runs,
    user_can_cancel_thread,
    user_can_review,
    user_can_run_thread,
)
from hitl.core.audit import audit_for_thread
from hitl.core.decisions import claims, quorum
from hitl.core.decisions.rule_stats import dry_run_opinions
from hitl.core.history.branches import thread_branches
from hitl.core.live import listeners
from hitl.core.models import Approval, HumanInterrupt, Run, Thread
from hitl.core.remote import state as remote_state
from hitl.review.batch import batch_context, label_decided
from hitl.review.forms import DecisionForm
from hitl.review.rendering import markdown, pretty_json
from hitl.review.selectors import (
    attach_failures,
    interrupt_clarification,
    mark_failed_actions,
    split_by_branch,
    thread_artifacts,
    thread_conversation,
    thread_failed_actions,
    thread_final_result,
)


def approve_refusal(row: HumanInterrupt, user) -> str:
    """Why `user` may not approve this four-eyes item's args ("" when they may; the
    requester's own refusal is said by the page, which knows who is looking)."""
    groups = (row.approval_policy or {}).get("from_groups") or []
    if user is None or row.approvals_required < 2 or not groups:
        return ""
    if user.groups.filter(name__in=groups).exists():
        return ""
    return f"Approvals for this action must come from: {', '.join(groups)}."


def interrupt_context(
    row: HumanInterrupt,
    *,
    can_answer: bool,
    form: DecisionForm | None = None,
    error: str = "",
    user=None,
    opinions: list[str] | None = None,
    restored: bool = False,
) -> dict[str, Any]:
    """One card; `opinions`: its dry-run rules' (rule_stats.dry_run_opinions), read if None;
    `restored`: the form holds a typed edit that Undo gave back."""
    form = form or DecisionForm(interrupt=row)
    raw = row.raw_value
    if opinions is None:
        opinions = dry_run_opinions([row])[row.pk]
    return {
        "rule_opinions": opinions,
        "approve_refused": approve_refusal(row, user) if can_answer else "",
        "row": row,
        "form": form,
        "error": error,
        "restored": restored and can_answer,
        "can_answer": can_answer,
        # Per reviewer: a card rendered for everyone (user=None) leaves it to the page.
        "snooze": claims.snooze_of(row, user) if can_answer else None,
        "description_html": markdown(row.description),
        "clarification": interrupt_clarification(row),
        "raw_json": pretty_json(raw) if row.kind == HumanInterrupt.Kind.RAW else "",
        "raw_is_text": isinstance(raw, str),
    }


DECISION_WORDS = {
    "accept": "accepted it as proposed",
    "edit": "edited and approved it",
    "response": "answered instead of running it",
    "ignore": "ignored it",
}


def outcome_context(row: HumanInterrupt) -> dict[str, Any]:
    """How a decided interrupt ended: who, which decision, and the args that went ahead."""
    answer = row.response_args
    final: Any = None
    if row.response_type == "edit" and isinstance(answer, dict):
        final = answer.get("args", answer)
    elif row.response_type == "accept":
        final = row.args
    if row.status == HumanInterrupt.Status.RESOLVED:
        decision = DECISION_WORDS.get(row.response_type, row.response_type)
    elif row.response_type:
        decision = f"was answered automatically on expiry ({row.response_type})"
    else:
        decision = f"is {row.get_status_display().lower()}"
    # Seconds left to undo: the page drops the words when they run out (live.js).
    undo_seconds = 0.0
    if row.undo_until is not None:
        undo_seconds = max(0.0, (row.undo_until - timezone.now()).total_seconds())
    who = row.answered_by
    if row.approvals_required > 1 and row.response_type in ("accept", "edit"):
        approvers = quorum.approvals_progress(row)["approvers"]  # four-eyes: all of them
        if len(approvers) > 1:
            who = ", ".join(approvers[:-1]) + " and " + approvers[-1]
            decision = "approved it" + (
                " with edited args" if row.response_type == "edit" else " as proposed"
            )
    return {
        "row": row,
        "who": who,
        "decision": decision,
        "undo_seconds": round(undo_seconds, 1),
        "final_json": pretty_json(final) if final not in (None, {}) else "",
        "response_text": answer if row.response_type == "response" else "",
    }


def credit_editors(rows: list[HumanInterrupt]) -> None:
    """Four-eyes items that ended edited: set `edited_by` (who changed the args) and
    `approvers` (who approved them), so the last approver is not credited with the edit."""
    four_eyes = [
        r for r in rows if r.approvals_required > 1 and r.response_type in ("accept", "edit")
    ]
    if not four_eyes:
        return
    by_row: dict[Any, list[Approval]] = {}
    for approval in (
        Approval.objects.filter(interrupt__in=four_eyes)
        .select_related("user")
        .order_by("created_at", "id")
    ):
        by_row.setdefault(approval.interrupt_id, []).append(approval)
    for row in four_eyes:
        final = [a for a in by_row.get(row.pk, []) if a.round == row.approval_round]
        names = [a.rule_label or (a.user.get_username() if a.user else "?") for a in final]
        row.approvers = names
        editors = [a for a in final if a.edited]
        if editors:
            first = editors[0]
            row.edited_by = first.rule_label or (first.user.get_username() if first.user else "?")


def interrupt_card(row: HumanInterrupt, *, can_answer: bool, request=None, **extra) -> str:
    return render_to_string(
        "hitl/partials/interrupt_card.html",
        interrupt_context(row, can_answer=can_answer, **extra),
        request=request,
    )


def inbox_interrupt_row(row: HumanInterrupt, request=None) -> str:
    return render_to_string("hitl/partials/inbox_interrupt_row.html", {"row": row}, request=request)


def inbox_interrupt_fragment(interrupt_id: Any) -> dict[str, Any] | None:
    """A pending interrupt's inbox row and notification text, or None if it is not pending."""
    row = (
        HumanInterrupt.objects.filter(pk=interrupt_id)
        .select_related("thread", "reviewer_group")
        .first()
    )
    if row is None or row.status != HumanInterrupt.Status.PENDING:
        return None
    clarification = interrupt_clarification(row)
    title = (
        (clarification or {}).get("question")
        or (f"Approve {row.action}" if row.action else "")
        or "The agent asks"
    )
    return {
        "html": inbox_interrupt_row(row),
        "notify": {"title": title[:120], "body": (row.thread.title or row.description)[:200]},
    }


def attach_inbox_row(message: dict[str, Any]) -> None:
    """Add a new pending interrupt's inbox row to its InterruptChanged message.

    Only while an inbox socket listens: the row is rendered once here for all of them.
    A socket that joins later renders rows for messages without one itself.
    """
    inboxes = [listeners.inbox_group(message.get("reviewer_group_id")), listeners.INBOX_ALL]
    if not listeners.groups_listened(inboxes):
        return
    fragment = inbox_interrupt_fragment(message["interrupt_id"])
    if fragment is not None:
        message["html"], message["notify"] = fragment["html"], fragment["notify"]


def inbox_thread_row(thread: Thread, request=None) -> str:
    if not hasattr(thread, "pending_items"):
        thread.pending_items = list(thread_pending_interrupts(thread))
    if not hasattr(thread, "failure"):
        attach_failures([thread])
    return render_to_string(
        "hitl/partials/inbox_thread_row.html", {"thread": thread}, request=request
    )


def thread_context(thread: Thread, user) -> dict[str, Any]:
    """Everything the thread page shows except the pending interrupt cards."""
    runs = list(thread_runs(thread).select_related("created_by")[:30])
    decided = list(
        thread.interrupts.exclude(status=HumanInterrupt.Status.PENDING)
        .select_related("responded_by")
        .order_by("-responded_at", "-created_at")[:30]
    )
    for row in decided:
        row.response_json = pretty_json(row.response_args) if row.response_args is not None else ""
    label_decided(decided)
    credit_editors(decided)
    final = thread_final_result(thread)
    branches = thread_branches(thread)
    for run in runs:
        run.branch = branches.of_run(run.pk)
    final_branch = branches.of_run(final.pk) if final else None
    conversation = thread_conversation(thread)
    artifacts, other_artifacts = split_by_branch(
        thread_artifacts(thread), branches, conversation.artifact_paths
    )
    failed = thread_failed_actions(thread)
    mark_failed_actions(runs, failed)
    # The latest run's approved action failed: the thread says so, whatever the agent did next.
    latest_failed = runs[0].failed_actions if runs else []
    shown_status = thread.status
    if latest_failed and thread.status in (Thread.Status.DONE, Thread.Status.ERROR):
        shown_status = "action failed"
    latest = runs[0] if runs else None
    # Only a cancel leaves a thread idle after a run: its run was stopped (cancelled) or
    # its pending decisions withdrawn (the paused run stays interrupted).
    cancelled = (
        latest is not None
        and thread.status == Thread.Status.IDLE
        and latest.status in (Run.Status.CANCELLED, Run.Status.INTERRUPTED)
    )
    ended = cancelled or (latest is not None and latest.status == Run.Status.ERROR)
    if cancelled:
        shown_status = "cancelled"
    remote = _remote_context(thread)
    audit = audit_for_thread(thread, limit=200)
    if latest is not None and latest.status == Run.Status.ERROR:
        # The banner says the failure; its trail line points there instead of repeating it.
        failures = [e for e in audit if e.kind == "run.failed" and e.event.run_id == latest.pk]
        if failures:
            failures[-1].shown_above = True
    return {
        "failed_actions": latest_failed,
        "latest_run": latest if ended else None,
        # The operators' retry (ops.run_retry) needs the change-run permission, as in admin.
        "can_retry": ended
        and latest.status == Run.Status.ERROR
        and user.has_perm("hitl.change_run"),
        "can_new_run": ended
        and remote is None  # another deployment's threads start there
        and thread.status not in (Thread.Status.BUSY, Thread.Status.INTERRUPTED)
        and user_can_run_thread(user, thread),
        "shown_status": shown_status,
        "final_items": _result_items(final.final_result) if final else [],
        "thread": thread,
        "runs": runs,
        "decided": decided,
        "final_run": final,
        "final_json": pretty_json(final.final_result) if final else "",
        "branches": branches,
        "final_branch": final_branch,
        # Another branch's result (a fork runs or ran since) is not shown as the thread's.
        "old_result": bool(final and branches.many and final_branch != branches.current),
        "artifacts": artifacts,
        "other_artifacts": other_artifacts,
        "conversation": conversation,
        "audit": audit,
        # Tracebacks are for whoever may read runs in admin, where they are shown too.
        "show_traceback": user.has_perm("hitl.view_run"),
        **batch_context(thread, user),
        "can_cancel": thread.status in (Thread.Status.BUSY, Thread.Status.INTERRUPTED)
        and user_can_cancel_thread(user, thread),
        "remote": remote,
    }


def _remote_context(thread: Thread) -> dict[str, Any] | None:
    """A mirrored thread's deployment, and a decision waiting to reach it."""
    link = remote_state.remote_link(thread)
    if link is None:
        return None
    error = link.deployment.last_error if link.deployment.last_error else ""
    return {"link": link, "pending": remote_state.delivery_pending(thread), "error": error}


def _result_items(value: Any) -> list[tuple[str, str, bool]]:
    """A dict result as (label, text, is_block) rows, summary first; other values render as JSON."""
    if not isinstance(value, dict):
        return []
    keys = sorted(value, key=lambda k: (k not in ("summary", "message", "answer"), 0))
    items = []
    for key in keys:
        item = value[key]
        label = str(key).replace("_", " ")
        if isinstance(item, str):
            items.append((label, item, "\n" in item))
        elif item is None:
            items.append((label, "—", False))
        elif isinstance(item, bool):
            items.append((label, "yes" if item else "no", False))
        elif isinstance(item, list) and all(isinstance(i, str) for i in item):
            shown = [i.rsplit("/", 1)[-1] if i.startswith("/mnt/user-data/") else i for i in item]
            items.append((label, ", ".join(shown) or "—", False))
        elif isinstance(item, (dict, list)):
            items.append((label, pretty_json(item), True))
        else:
            items.append((label, pretty_json(item), False))
    return items


SECTIONS = (
    "status",
    "actions",
    "batch",
    "failure",
    "result",
    "artifacts",
    "conversation",
    "runs",
    "audit",
)


def thread_sections(thread: Thread, user, request=None) -> dict[str, str]:
    """Each live-updated section of the thread page as HTML, keyed by section name."""
    context = thread_context(thread, user)
    return {
        name: render_to_string(f"hitl/partials/thread_{name}.html", context, request=request)
        for name in SECTIONS
    }


def thread_interrupt_cards(thread: Thread, user, request=None) -> list[tuple[HumanInterrupt, str]]:
    return [
        (
            row,
            interrupt_card(row, can_answer=user_can_review(user, row), request=request, user=user),
        )
        for row in thread_pending_interrupts(thread)
    ]
