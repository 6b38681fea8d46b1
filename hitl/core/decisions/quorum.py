"""Four-eyes approvals: N distinct approvals of the same final args resolve an interrupt.

Called inside the deciding transaction (`interrupt_resolve`, rules), with the thread
and the interrupt locked, so approvals on one interrupt are serialized: of 20
reviewers racing on a 2-of-M item exactly one sees the quorum reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group

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
    """The quorum an interrupt starts with: the stricter of its group's policy and its
    value, field by field.

    The interrupt value may carry `"approvals": {"required": 2, "from_groups": [...],
    "allow_self_approval": false, "reject_ends": true}` (or `"approvals": 2`). It can
    raise `required`, narrow `from_groups` to a subset of the policy's (any groups when
    the policy names none), forbid self-approval and make a reject end the item; where
    it asks for the opposite, the policy (or the default: no self-approval, a reject
    ends it) stands.
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
    own_groups = sorted({g.name for g in policy.approval_groups.all()}) if policy else []
    from_groups = own_groups
    asked_groups = spec.get("from_groups")
    if isinstance(asked_groups, list):
        names = {g for g in asked_groups if isinstance(g, str) and g}
        narrower = sorted(names & set(own_groups)) if own_groups else sorted(names)
        # Nothing of the policy's groups left: the interrupt asked to widen them.
        from_groups = narrower or own_groups

    allow_self = policy.allow_self_approval if policy else False
    if spec.get("allow_self_approval") is False:
        allow_self = False
    reject_ends = policy.reject_ends if policy else True
    if spec.get("reject_ends") is True:
        reject_ends = True
    snapshot = {
        "from_groups": from_groups,
        "allow_self_approval": allow_self,
        "reject_ends": reject_ends,
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


def approve_refusal(row: HumanInterrupt, user) -> str:
    """Why `user` may not give `row`'s next approval now ("" when they may), so that the
    channels that offer Approve (mail, Slack) leave it out instead of offering a refusal."""
    if user is None or row.approvals_required < 2:
        return ""
    try:
        _check_approver(row.thread, row, user)
    except Forbidden as exc:
        return exc.message
    if Approval.objects.filter(interrupt=row, user=user, round=row.approval_round).exists():
        return (
            "You have approved these args already; the next approval must come from "
            "another reviewer."
        )
    return ""


def approval_record(
    *,
    thread: Thread,
    row: HumanInterrupt,
    response_type: str,
    args: Any,
    user=None,
    rule=None,
    seen_round: int | None = None,
    via: str = "",
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
                **({"via": via} if via else {}),
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
            **({"via": via} if via else {}),
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
    events.send_event_on_commit(
        events.publish_interrupt_progress,
        thread_id=thread.pk,
        interrupt_id=row.pk,
        reviewer_group_id=row.reviewer_group_id,
        **approvals_progress(row),
    )
