"""What every way of going on from a pause shares: telling listeners of the thread's new
status, and withdrawing the interrupts it leaves behind (superseded by new input, a
double-texted run, a breakpoint continued)."""

from __future__ import annotations

from hitl.core import audit
from hitl.core.live import events
from hitl.core.models import HumanInterrupt, Thread

# The audit reason of interrupts withdrawn because the thread went on without them.
SUPERSEDED = "superseded by new input"
# The interrupt id prefix of a pause at a LangGraph breakpoint (interrupt_before/after).
BREAKPOINT = "breakpoint:"


def announce_thread(
    thread: Thread, run_end: events.RunEnd | None = None, *, run_ended: bool = False
) -> None:
    """Tell every listener of the thread its new status once the change commits.

    `run_ended` marks the announcement of a run's end (its waiters then read it even
    when a rule already queued the next run and the thread is busy again).
    """
    status, thread_id, requester_id = thread.status, thread.pk, thread.requester_id
    events.send_event_on_commit(
        events.publish_thread_changed,
        thread_id=thread_id,
        status=status,
        requester_id=requester_id,
        run_end=run_end,
        run_ended=run_ended,
    )


def interrupts_withdraw(
    *,
    thread: Thread,
    user=None,
    reason: str = "",
    rows: list[HumanInterrupt] | None = None,
    data: dict | None = None,
) -> None:
    """Withdraw the thread's pending interrupts, or just `rows` of them (inside the
    caller's transaction, the thread locked): cancelled, audited with `reason` (and
    `data`), gone live from every open page. Decisions under their grace period stay
    recorded but never resume the thread."""
    pending = rows if rows is not None else list(thread.interrupts.pending())
    HumanInterrupt.objects.filter(pk__in=[row.pk for row in pending]).update(
        status=HumanInterrupt.Status.CANCELLED
    )
    if rows is None:
        held = list(
            thread.interrupts.filter(undo_until__isnull=False).values_list(
                "pk", "reviewer_group_id"
            )
        )
        thread.interrupts.filter(pk__in=[pk for pk, _ in held]).update(undo_until=None)
        for pk, group_id in held:  # no longer undoable: messages offering Undo drop it
            events.send_event_on_commit(
                events.announce_interrupt_released,
                thread_id=thread.pk,
                interrupt_id=pk,
                reviewer_group_id=group_id,
            )
    detail = {**({"reason": reason} if reason else {}), **(data or {})} or None
    audit.audit_bulk(
        [
            audit.audit_event(
                kind=audit.Kind.INTERRUPT_CANCELLED,
                thread=thread,
                interrupt=row,
                actor=user,
                data=detail,
            )
            for row in pending
        ]
    )
    for row in pending:
        events.interrupt_changed_on_commit(row, "cancelled")
