"""Record answers: every decision, whoever gives it (reviewer, rule, expiry, bulk, API),
goes through here; the thread resumes once every interrupt of its run is answered."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import contract
from hitl.core import audit
from hitl.core.access.permissions import user_can_review, user_can_view_thread
from hitl.core.db import answer_statements, run_statements
from hitl.core.db.retry import retry_transient
from hitl.core.decisions import claims, quorum
from hitl.core.errors import Conflict, Forbidden, Invalid, NotFound, check_storable
from hitl.core.live import events
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.runs import dispatch
from hitl.core.runs.options import Locked, RunOptions
from hitl.core.runs.pauses import announce_thread
from hitl.core.runs.start import enqueue_on_commit

log = logging.getLogger(__name__)


def interrupt_rows_for_update(thread_id: Any):
    """A thread's interrupt rows, locked, with what answering one reads of them."""
    return (
        HumanInterrupt.objects.select_for_update(of=("self",))
        .select_related("responded_by", "reviewer_group", "run")
        .filter(thread_id=thread_id)
    )


def request_of(row: HumanInterrupt) -> contract.Request:
    _, requests = contract.requests_for(row.raw_value, row.response_schema)
    request = requests[row.position] if row.position < len(requests) else requests[0]
    # The row is the source of truth for what is allowed (admins may have changed it).
    request.allow_accept, request.allow_edit = row.allow_accept, row.allow_edit
    request.allow_respond, request.allow_ignore = row.allow_respond, row.allow_ignore
    request.args_schema = row.args_schema
    return request


# What an answer (and taking one back) changes on its row.
ANSWER_FIELDS = [
    "status",
    "response_type",
    "response_args",
    "responded_by",
    "responded_at",
    "undo_until",
    "decided_by_rule",
]
_NOT_EXPIRED = object()


def interrupt_thread_id(interrupt_id: Any) -> Any | None:
    """The thread of an interrupt, read unlocked: deciders lock the thread before the row."""
    return (
        HumanInterrupt.objects.filter(pk=interrupt_id)
        .values_list("thread_id", flat=True)
        .one_or_none()
    )


@dataclass
class Answer:
    """What recording one answer did."""

    row: HumanInterrupt
    # The resume run it queued (it completed its run's set of answers), or None.
    resume_run: Run | None = None
    # Four-eyes: the approvals so far, when this one did not complete the quorum.
    progress: quorum.Verdict | None = None


@dataclass(frozen=True)
class Reply:
    """One answer as a channel gives it: the decision and how to take it.

    `grace` (seconds): the answer counts at once, but the thread resumes only when it
    ends; until then `interrupt_undo` takes it back. `approval_round`: the four-eyes
    round the reviewer saw. `lenient` reads an edit's string values as the types its
    schema asks for (string-sending clients such as the Agent Inbox). `respect_claim`
    refuses an item someone else claimed ("I'm on it") with a 409 naming them. `via`
    names the channel when not the browser or the API ("slack", "email").
    """

    response_type: str
    args: Any = None
    grace: float = 0
    approval_round: int | None = None
    lenient: bool = False
    respect_claim: bool = False
    via: str = ""


def answer_record(
    *,
    locked: Locked,
    reply: Reply,
    user=None,
    rule=None,
    expired_by: Any = _NOT_EXPIRED,
    options: RunOptions | None = None,
    announce: bool = True,
    at: datetime | None = None,
) -> Answer:
    """Record an answer to a pending row: every answer, whoever gives it, comes here.

    Inside the caller's transaction, with `locked.thread` and `locked.row` locked and
    `reply.args` already checked against the row's config and schema. Who answered: a
    reviewer (`user`), a decision rule (`rule`), or the item's expiry (`expired_by`: the
    operator who expired it, or None for the system). Counts toward four-eyes, stores
    the answer with its audit event, announces it after commit and queues the resume
    (carrying `options`) once every interrupt of the run is answered. `at`: when it
    counts as answered (default: now). `reply.via` shows in the trail.
    """
    thread, row = locked.thread, locked.row
    response_type, args = reply.response_type, reply.args
    grace, via = reply.grace, reply.via
    expired = expired_by is not _NOT_EXPIRED
    if row.approvals_required > 1 and not expired:
        verdict = quorum.approval_record(
            thread=thread,
            row=row,
            user=user,
            rule=rule,
            response_type=response_type,
            args=args,
            seen_round=reply.approval_round,
            via=via,
        )
        if not verdict.resolve:
            return Answer(row=row, progress=verdict)
        response_type, args = verdict.response_type, verdict.args
    row.status = HumanInterrupt.Status.EXPIRED if expired else HumanInterrupt.Status.RESOLVED
    row.response_type = response_type
    row.response_args = args
    row.responded_by = user
    row.responded_at = at or timezone.now()
    row.undo_until = row.responded_at + timedelta(seconds=grace) if grace else None
    row.decided_by_rule = rule.label if rule is not None else ""
    data = audit.answer_data(row)
    if grace:
        data["grace_seconds"] = grace
    if rule is not None:
        data.update({"rule": rule.name, "rule_version": rule.version})
    if expired:
        data["automatic"] = True
    if via:
        data["via"] = via
    event = audit.audit_event(
        kind=audit.Kind.INTERRUPT_EXPIRED if expired else audit.Kind.INTERRUPT_ANSWERED,
        thread=thread,
        interrupt=row,
        run=row.run_id if expired else None,
        actor=expired_by if expired else user,
        data=data,
    )
    if grace:
        pk = row.pk
        transaction.on_commit(lambda: dispatch.schedule_release(pk, grace))
    if announce:
        status, responded_by = row.status, user.get_username() if user is not None else None
        events.interrupt_changed_on_commit(row, status, responded_by=responded_by)
    # The answer is written with the resume run it completes (one statement), or alone.
    resume_run = resume_when_answered(
        locked=locked, user=user, options=options, answered=(ANSWER_FIELDS, event)
    )
    return Answer(row=row, resume_run=resume_run)


def interrupt_resolve(
    *,
    interrupt_id: Any,
    user,
    response_type: str,
    args: Any = None,
    grace: float = 0,
    approval_round: int | None = None,
    respect_claim: bool = False,
    via: str = "",
) -> Answer:
    """Answer one interrupt as a reviewer does (see `Reply`); resume the thread once
    every interrupt of its run is answered."""
    reply = Reply(
        response_type=response_type,
        args=args,
        grace=grace,
        approval_round=approval_round,
        respect_claim=respect_claim,
        via=via,
    )
    return interrupt_answer(interrupt_id=interrupt_id, user=user, reply=reply)


@retry_transient
def interrupt_answer(
    *,
    interrupt_id: Any,
    user,
    reply: Reply,
    thread_id: Any = None,
    options: RunOptions | None = None,
    locked: Locked | None = None,
    savepoint: bool = True,
) -> Answer:
    """Answer one interrupt; resume the thread once every interrupt of its run is answered.

    A caller that already knows the row's thread passes `thread_id` (one read less);
    `options` go into the resume run if this answer creates it. Returns the Answer: its
    row, and the resume run it queued. `locked`: the thread, the row and every row of
    the row's run as the caller read them with select_for_update in its own open
    transaction (the rows with their responded_by, reviewer_group and run): not read
    again. `savepoint=False` is for a caller whose own transaction rolls back whole on
    any error (two statements less).
    """
    response_type, args, grace = reply.response_type, reply.args, reply.grace
    if not isinstance(grace, (int, float)) or isinstance(grace, bool) or not 0 <= grace <= 600:
        raise Invalid("The grace period must be a number of seconds between 0 and 600.")
    check_storable(args, "The answer")
    check_storable(response_type, "The decision type")
    try:
        interrupt_id = uuid.UUID(str(interrupt_id))
    except ValueError:
        raise NotFound("No such interrupt.") from None
    if locked is not None:
        thread_id = locked.thread.pk
    if thread_id is None:
        thread_id = interrupt_thread_id(interrupt_id)
    if thread_id is None:
        raise NotFound("No such interrupt.")
    with transaction.atomic(savepoint=savepoint):
        siblings = None
        if locked is not None and locked.row is not None and locked.row.pk == interrupt_id:
            thread, row, siblings = locked.thread, locked.row, locked.siblings
        else:
            # Lock the thread first: decisions on one thread are serialized, so exactly
            # one of them sees "nothing left pending" and enqueues the resume.
            thread = Thread.objects.select_for_update().get(pk=thread_id)
            row = interrupt_rows_for_update(thread_id).filter(pk=interrupt_id).one_or_none()
        if row is None:
            raise NotFound("No such interrupt.")
        answer_refusal(thread=thread, row=row, user=user, respect_claim=reply.respect_claim)
        try:
            normalized = contract.check_response(
                request_of(row), response_type, args, lenient=reply.lenient
            )
        except contract.ContractError as exc:
            raise Invalid(str(exc)) from None
        answer = answer_record(
            locked=Locked(thread, row, siblings),
            reply=replace(reply, args=normalized),
            user=user,
            options=options,
        )
    return answer


def answer_refusal(*, thread: Thread, row: HumanInterrupt, user, respect_claim: bool) -> None:
    """Raise why `user` may not answer `row` now (routing, status, someone else's claim)."""
    if not user_can_review(user, row):
        if user_can_view_thread(user, thread):
            raise Forbidden("This interrupt is routed to a reviewer group you are not in.")
        raise NotFound("No such interrupt.")
    if row.status != HumanInterrupt.Status.PENDING:
        if row.status == HumanInterrupt.Status.RESOLVED:
            who = row.answered_by or "someone"
            if row.undo_until is not None and row.undo_until > timezone.now():
                raise Conflict(f"Already answered by {who} (who may still undo it).")
            raise Conflict(f"Already answered by {who}.")
        raise Conflict(f"This interrupt is {row.status}.")
    if respect_claim:
        claims.claim_refusal(row, user)


def interrupt_answer_check(
    *, interrupt_id: Any, user, response_type: str, respect_claim: bool = False
) -> HumanInterrupt:
    """The row, if `user` may answer it with `response_type` now; else what resolving raises.

    For a channel that takes the answer in a second step (Slack's Respond form): the form
    shows the item's args, so it opens only for someone `interrupt_resolve` would accept.
    Reads without locking: the answer itself is checked again, under the lock.
    """
    try:
        interrupt_id = uuid.UUID(str(interrupt_id))
    except ValueError:
        raise NotFound("No such interrupt.") from None
    row = (
        HumanInterrupt.objects.select_related("thread", "responded_by", "reviewer_group", "run")
        .filter(pk=interrupt_id)
        .first()
    )
    if row is None:
        raise NotFound("No such interrupt.")
    answer_refusal(thread=row.thread, row=row, user=user, respect_claim=respect_claim)
    allowed = request_of(row).allowed_types
    if response_type not in allowed:
        raise Invalid(
            f"This interrupt does not allow {response_type!r} "
            f"(allowed: {', '.join(allowed) or 'nothing'})."
        )
    return row


@retry_transient
def interrupt_undo(*, interrupt_id: Any, user) -> HumanInterrupt:
    """Take back a decision within its grace period: the item is pending again for everyone."""
    try:
        interrupt_id = uuid.UUID(str(interrupt_id))
    except ValueError:
        raise NotFound("No such interrupt.") from None
    thread_id = interrupt_thread_id(interrupt_id)
    if thread_id is None:
        raise NotFound("No such interrupt.")
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        row = (
            HumanInterrupt.objects.select_for_update(of=("self",))
            .select_related("reviewer_group")
            .get(pk=interrupt_id)
        )
        if not user_can_review(user, row):
            raise NotFound("No such interrupt.")
        if row.status != HumanInterrupt.Status.RESOLVED or row.responded_by_id != user.pk:
            raise Conflict("Only a decision of your own can be undone.")
        # The clock decides, not the release task: a late task must not make undo succeed.
        if row.undo_until is None or row.undo_until <= timezone.now():
            raise Conflict("Too late to undo: the grace period has ended and the agent resumed.")
        undone = row.response_type
        if row.approvals_required > 1:
            quorum.approval_undo(row=row, user=user)
        row.status = HumanInterrupt.Status.PENDING
        row.response_type = ""
        row.response_args = None
        row.responded_by = None
        row.responded_at = None
        row.undo_until = None
        row.save(update_fields=ANSWER_FIELDS)
        audit.audit_record(
            kind=audit.Kind.INTERRUPT_UNDONE,
            thread=thread,
            interrupt=row,
            actor=user,
            data={"response_type": undone, "action": row.action},
        )
        events.interrupt_changed_on_commit(row, "pending")
    return row


@retry_transient
def interrupt_release(*, interrupt_id: Any, now=None) -> Run | None:
    """End a decision's grace period once it has passed; resume the thread if it is ready."""
    now = now or timezone.now()
    thread_id = interrupt_thread_id(interrupt_id)
    if thread_id is None:
        return None
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        row = (
            HumanInterrupt.objects.select_for_update(of=("self",))
            .select_related("run", "responded_by")
            .get(pk=interrupt_id)
        )
        if row.undo_until is None or row.undo_until > now:
            return None  # undone, released already, or not due yet
        row.undo_until = None
        row.save(update_fields=["undo_until"])
        if row.status == HumanInterrupt.Status.RESOLVED:
            # Messages that offered Undo ("may still be undone") are brought up to date.
            events.send_event_on_commit(
                events.announce_interrupt_released,
                thread_id=thread.pk,
                interrupt_id=row.pk,
                reviewer_group_id=row.reviewer_group_id,
            )
        if (
            row.status != HumanInterrupt.Status.RESOLVED
            or thread.status != Thread.Status.INTERRUPTED
        ):
            return None
        return resume_when_answered(locked=Locked(thread, row), user=row.responded_by)


def interrupt_release_due(*, now=None, limit: int = 200) -> int:
    """Release every decision whose grace period has ended (the sweep's safety net)."""
    now = now or timezone.now()
    due = list(
        HumanInterrupt.objects.filter(undo_until__lte=now)
        .order_by("undo_until")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in due:
        interrupt_release(interrupt_id=pk, now=now)
    return len(due)


def _answered(row: HumanInterrupt) -> bool:
    # An interrupt that expired with an automatic answer counts as answered.
    return row.status == HumanInterrupt.Status.RESOLVED or (
        row.status == HumanInterrupt.Status.EXPIRED and bool(row.response_type)
    )


def resume_when_answered(
    *,
    locked: Locked,
    user,
    options: RunOptions | None = None,
    answered: tuple[list[str], Any] | None = None,
) -> Run | None:
    """Queue the resume run (carrying `options`) once every interrupt of `locked.row`'s
    run is answered.

    Runs inside the deciding transaction with the thread locked; shared by reviewer
    answers and automatic answers on expiry. Raises Invalid when the graph's
    response_schema refuses the answer (the caller's transaction rolls back).
    `locked.siblings`: every row of the row's run as the caller holds them, locked and
    current (else they are read here). `answered`: the fields of `locked.row` its
    answer changed and the answer's audit event, not yet written: written here, with
    the resume run where there is one.
    """
    run = _resume_when_answered(locked=locked, user=user, options=options, answered=answered)
    if run is None and answered is not None:
        answer_statements.save_with_audit(locked.row, *answered)
    return run


def _resume_when_answered(
    *, locked: Locked, user, options: RunOptions | None, answered: tuple[list[str], Any] | None
) -> Run | None:
    thread, row, siblings = locked.thread, locked.row, locked.siblings
    if siblings is None:
        siblings = list(HumanInterrupt.objects.filter(run_id=row.run_id))
    # The row as answered (its answer may not be written yet), not as read.
    siblings = sorted(
        (row if s.pk == row.pk else s for s in siblings),
        key=lambda s: (s.interrupt_id, s.position),
    )
    by_interrupt: dict[str, list[HumanInterrupt]] = {}
    for sibling in siblings:
        by_interrupt.setdefault(sibling.interrupt_id, []).append(sibling)
    # The graph's own response_schema is checked as soon as one interrupt is complete.
    mine = by_interrupt[row.interrupt_id]
    if all(_answered(s) for s in mine):
        value = _resume_value(mine)
        try:
            contract.check_resume_schema(row.response_schema, value)
        except contract.ContractError as exc:
            raise Invalid(str(exc)) from None
    # A decision still under its grace period may be undone: wait for it to end.
    if any(s.status == HumanInterrupt.Status.PENDING or s.undo_until for s in siblings):
        return None
    resume = {
        interrupt: _resume_value(rows)
        for interrupt, rows in by_interrupt.items()
        if all(_answered(r) for r in rows)
    }
    if not resume:  # every interrupt was cancelled or expired without an answer
        return None
    fields = (options or RunOptions()).resume_fields(row)
    run = Run(
        thread=thread,
        kind=Run.Kind.RESUME,
        input={"resume": resume},
        created_by=user if user is not None and user.is_authenticated else None,
        dispatched_at=timezone.now(),  # sent on commit; a failed send clears it
        **fields,
    )
    thread.status = Thread.Status.BUSY
    # The thread (locked above) and the run (and the answer that completes it), in one
    # statement where the database can.
    changed = ["status", "updated_at"]
    if answered is None:
        inserted = run_statements.run_insert_with_thread(run=run, thread=thread, fields=changed)
    else:
        inserted = answer_statements.save_with_audit_and_run(
            obj=row,
            fields=answered[0],
            event=answered[1],
            run=run,
            thread=thread,
            thread_fields=changed,
        )
    if not inserted:
        raise NotFound("No such thread.")
    announce_thread(thread)
    enqueue_on_commit(run)
    return run


def _resume_value(rows: list[HumanInterrupt]) -> Any:
    answers = [(request_of(r), r.response_type, r.response_args) for r in rows]
    return contract.resume_value(rows[0].kind, rows[0].raw_value, answers)
