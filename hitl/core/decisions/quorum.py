"""Four-eyes approvals: N distinct approvals of the same final args resolve an interrupt.

Called inside the deciding transaction (`interrupt_resolve`, rules), with the thread
and the interrupt locked, so approvals on one interrupt are serialized: of 20
reviewers racing on a 2-of-M item exactly one sees the quorum reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction

from hitl.core import audit
from hitl.core.access.permissions import group_policy
from hitl.core.errors import Conflict, Forbidden
from hitl.core.live import events
from hitl.core.models import Approval, HumanInterrupt, Thread

MAX_APPROVALS = 20


@dataclass
class Verdict:
    """Resolve now with (response_type, args), or stay pending with the progress so far."""

    resolve: bool
    response_type: str = ""
    args: Any = None
    approvals: int = 0
    required: int = 1


def approval_settings(value: Any, position: int, group: Group | None) -> dict:
    """The quorum an interrupt starts with: the stricter of its group's policy and its value.

    The interrupt value may carry `"approvals": {"required": 2, "from_groups": [...],
    "allow_self_approval": false, "reject_ends": true}` (or `"approvals": 2`). It can
    only raise the group's requirement, never lower it.
    """
    spec = value
    if isinstance(value, list):
        spec = value[position] if position < len(value) else None
    spec = spec.get("approvals") if isinstance(spec, dict) else None
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = {"required": spec}
    spec = spec if isinstance(spec, dict) else {}
    policy = group_policy(group) if group is not None else None
    required = policy.approvals_required if policy else 1
    asked = spec.get("required")
    if isinstance(asked, int) and not isinstance(asked, bool):
        required = max(required, min(asked, MAX_APPROVALS))
    from_groups = []
    if policy is not None and policy.approvals_required > 1:
        from_groups = [g.name for g in policy.approval_groups.all()]
    if isinstance(spec.get("from_groups"), list):
        from_groups += [g for g in spec["from_groups"] if isinstance(g, str)]

    def flag(name: str, default: bool) -> bool:
        own = getattr(policy, name) if policy else default
        asked = spec.get(name)
        return asked if isinstance(asked, bool) else own

    snapshot = {
        "from_groups": sorted(set(from_groups)),
        "allow_self_approval": flag("allow_self_approval", False),
        "reject_ends": flag("reject_ends", True),
        "rule_counts_as_approval": bool(policy and policy.rule_counts_as_approval),
    }
    return {"approvals_required": max(1, required), "approval_policy": snapshot}


def current_args(row: HumanInterrupt) -> Any:
    return row.approval_args if row.approval_args is not None else row.args


def approval_count(row: HumanInterrupt) -> int:
    return Approval.objects.filter(interrupt=row, round=row.approval_round).count()


def approvals_progress(row: HumanInterrupt) -> dict[str, Any]:
    """Who approved the current args so far, for pages and live updates."""
    names = [
        a.rule_label or (a.user.get_username() if a.user else "?")
        for a in Approval.objects.filter(interrupt=row, round=row.approval_round)
        .select_related("user")
        .order_by("created_at", "id")
    ]
    return {
        "approvals": len(names),
        "required": row.approvals_required,
        "approvers": names,
        "edited": row.approval_args is not None,
    }


def _check_approver(thread: Thread, row: HumanInterrupt, user) -> None:
    policy = row.approval_policy or {}
    if thread.requester_id == user.pk and not policy.get("allow_self_approval"):
        raise Forbidden(
            "You requested this thread, so you cannot approve its actions; "
            "the approvals must come from other reviewers."
        )
    groups = policy.get("from_groups") or []
    if groups and not user.groups.filter(name__in=groups).exists():
        raise Forbidden(f"Approvals for this action must come from: {', '.join(groups)}.")


def approval_record(
    *,
    thread: Thread,
    row: HumanInterrupt,
    response_type: str,
    args: Any,
    user=None,
    rule=None,
    seen_round: int | None = None,
) -> Verdict:
    """Count one decision toward `row`'s quorum; say whether the interrupt resolves now.

    `args` is the normalized answer (`{action, args}` for an edit). Exactly one of
    `user` and `rule` is given. `seen_round` is the round the reviewer's page showed:
    an approval of args they have not seen (edited since) is refused.
    """
    policy = row.approval_policy or {}
    required = row.approvals_required
    if response_type in ("ignore", "response"):
        if policy.get("reject_ends", True):
            return Verdict(resolve=True, response_type=response_type, args=args)
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_APPROVED,
            thread=thread,
            interrupt=row,
            actor=user,
            data={
                "vote": "reject",
                "response_type": response_type,
                "answer": args,
                **_rule_data(rule),
            },
        )
        count = approval_count(row)
        _announce(thread, row)
        return Verdict(resolve=False, approvals=count, required=required)
    if user is not None:
        _check_approver(thread, row, user)
    if seen_round is not None and seen_round != row.approval_round:
        raise Conflict(
            "The args were edited since you opened this, and the earlier approvals reset; "
            "review the new args before approving."
        )
    before = current_args(row)
    final = args["args"] if response_type == "edit" and isinstance(args, dict) else before
    edited = final != before
    if edited:
        # They approved other args: the earlier approvals no longer count.
        row.approval_round += 1
        row.approval_args = final
        row.save(update_fields=["approval_round", "approval_args"])
    elif (
        user is not None
        and Approval.objects.filter(interrupt=row, user=user, round=row.approval_round).exists()
    ):
        raise Conflict(
            f"You have already approved this; it needs {required} approvals "
            "from different reviewers."
        )
    elif (
        rule is not None
        and Approval.objects.filter(
            interrupt=row, rule__isnull=False, round=row.approval_round
        ).exists()
    ):
        return Verdict(resolve=False, approvals=approval_count(row), required=required)
    Approval.objects.create(
        interrupt=row,
        user=user,
        rule=rule,
        rule_label=rule.label if rule is not None else "",
        round=row.approval_round,
        args=final,
        edited=edited,
    )
    count = approval_count(row)
    audit.audit_record(
        kind=audit.Kind.INTERRUPT_APPROVED,
        thread=thread,
        interrupt=row,
        actor=user,
        data={
            "vote": "approve",
            "approvals": count,
            "required": required,
            "edited": edited,
            "args": final,
            "action": row.action,
            **_rule_data(rule),
        },
    )
    if count >= required:
        if final == row.args:
            return Verdict(
                resolve=True, response_type="accept", args=None, approvals=count, required=required
            )
        return Verdict(
            resolve=True,
            response_type="edit",
            args={"action": row.action, "args": final},
            approvals=count,
            required=required,
        )
    _announce(thread, row)
    return Verdict(resolve=False, approvals=count, required=required)


def approval_undo(*, row: HumanInterrupt, user) -> None:
    """Undoing the deciding approval takes that approval back too."""
    Approval.objects.filter(interrupt=row, user=user, round=row.approval_round).delete()


def _rule_data(rule) -> dict[str, Any]:
    return {"rule": rule.name, "rule_version": rule.version} if rule is not None else {}


def _announce(thread: Thread, row: HumanInterrupt) -> None:
    thread_id, pk, group_id = thread.pk, row.pk, row.reviewer_group_id
    progress = approvals_progress(row)
    transaction.on_commit(
        lambda: events.publish_interrupt_progress(
            thread_id=thread_id, interrupt_id=pk, reviewer_group_id=group_id, **progress
        )
    )
