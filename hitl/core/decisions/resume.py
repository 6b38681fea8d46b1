"""Answer a thread's pending interrupts from a resume value, as API clients send it.

A LangGraph `Command(resume=...)` (or an AG-UI `resume` entry) is translated into one
`interrupt_answer` call per row, all inside one transaction: either every
answer is recorded (and the resume run queued by the last one), or none is. So
records, audit and live pages stay exactly as if reviewers had answered in the UI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from agents import contract
from hitl.core import errors
from hitl.core.db import answer_statements
from hitl.core.decisions.answer import Reply, interrupt_answer
from hitl.core.errors import check_storable
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.runs.options import Locked, RunOptions

CANCELLED = object()  # an AG-UI resume entry with status "cancelled"

_DECISIONS = ("approve", "edit", "reject", "respond")


def _is_client_tool(row: HumanInterrupt) -> bool:
    return isinstance(row.raw_value, dict) and bool(row.raw_value.get("client_tool"))


def _label(row: HumanInterrupt) -> str:
    return f"interrupt {row.pk} ({row.action or row.kind})"


def answer_for(row: HumanInterrupt, payload: Any) -> tuple[str, Any]:
    """One payload for one row -> (response_type, args) for interrupt_answer.

    Accepts a HumanResponse `{type, args}`, a HumanInTheLoopMiddleware decision
    `{type: approve|edit|reject|respond, ...}`, a text (a `response`), or CANCELLED (an
    `ignore`). A client tool's result may be any JSON value but null. A null says
    nothing: skipping is `{"type": "ignore"}`, never a side effect of a missing value.
    """
    if payload is CANCELLED:
        return "ignore", None
    if payload is None:
        raise errors.Invalid(
            f"The answer for {_label(row)} is null: send a HumanResponse {{type, args}} "
            '(skip it with {"type": "ignore"}).'
        )
    # {"type": "edit"} is a HumanResponse unless it carries a decision's edited_action.
    if (
        isinstance(payload, dict)
        and payload.get("type") in contract.RESPONSE_TYPES
        and not (payload["type"] == "edit" and "edited_action" in payload)
    ):
        return payload["type"], payload.get("args")
    if isinstance(payload, dict) and payload.get("type") in _DECISIONS:
        kind, message = payload["type"], payload.get("message")
        if kind == "approve":
            return "accept", None
        if kind == "edit":
            edited = payload.get("edited_action")
            if not isinstance(edited, dict):
                raise errors.Invalid(
                    f"An edit decision for {_label(row)} needs edited_action {{name, args}}."
                )
            return "edit", {"action": edited.get("name", row.action), "args": edited.get("args")}
        if kind == "respond":
            return "response", message
        # reject: its reason (LangChain's `message`; the Agent Inbox sends its text box
        # as `args`) goes back to the graph with the rejection, never as a `respond`.
        reason = message if message is not None else payload.get("args")
        reason = reason if isinstance(reason, str) and reason.strip() else None
        decided = row.kind in (HumanInterrupt.Kind.HITL_REQUEST, HumanInterrupt.Kind.TOOL_APPROVAL)
        if reason and row.allow_respond and not (decided and row.allow_ignore):
            return "response", reason  # a HumanInterrupt's text answer, as before
        return "ignore", reason
    if isinstance(payload, str):
        return "response", payload
    if _is_client_tool(row):
        return "response", json.dumps(payload)
    raise errors.Invalid(
        f"Cannot answer {_label(row)} with {type(payload).__name__} {json.dumps(payload)[:80]}: "
        "send a HumanResponse {type, args}, a decision {type: approve|edit|reject|respond}, "
        "or a text."
    )


def answers_for_interrupt(rows: list[HumanInterrupt], value: Any) -> list[tuple[Any, str, Any]]:
    """One LangGraph interrupt's resume value -> (row, type, args) per request.

    The value has the shape the graph asked for: a HumanResponse for a
    HumanInterrupt, a list of them for a list (a one-element list also answers a
    single HumanInterrupt, as the Agent Inbox sends it), `{"decisions": [...]}` for a
    HumanInTheLoopMiddleware request, a decision for a tool approval, anything for a
    raw interrupt.
    """
    rows = sorted(rows, key=lambda r: r.position)
    kind = rows[0].kind
    if kind == HumanInterrupt.Kind.HITL_REQUEST:
        if isinstance(value, dict) and isinstance(value.get("decisions"), list):
            value = value["decisions"]
        if not isinstance(value, list) or len(value) != len(rows):
            raise errors.Invalid(
                f"Interrupt {rows[0].interrupt_id} asks for {len(rows)} decisions: "
                'resume with {"decisions": [...]} holding one decision per action.'
            )
        return [(row, *answer_for(row, item)) for row, item in zip(rows, value, strict=True)]
    if isinstance(value, list) and kind != HumanInterrupt.Kind.RAW:
        if len(value) != len(rows):
            raise errors.Invalid(
                f"Interrupt {rows[0].interrupt_id} has {len(rows)} request(s); "
                f"the resume list has {len(value)} answer(s)."
            )
        return [(row, *answer_for(row, item)) for row, item in zip(rows, value, strict=True)]
    if len(rows) != 1:
        raise errors.Invalid(
            f"Interrupt {rows[0].interrupt_id} has {len(rows)} requests: resume with a list "
            "holding one HumanResponse per request."
        )
    return [(rows[0], *answer_for(rows[0], value))]


_ID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _looks_like_id(key: str) -> bool:
    """A LangGraph interrupt id (32 hex digits) or a HumanInterrupt id (a UUID)."""
    return bool(_ID.fullmatch(key.lower()))


def _pending_by_interrupt(thread: Thread) -> dict[str, list[HumanInterrupt]]:
    groups: dict[str, list[HumanInterrupt]] = {}
    for row in thread.interrupts.pending().in_order():
        groups.setdefault(row.interrupt_id, []).append(row)
    return groups


def _pending_locked(locked: Locked) -> tuple[dict[str, list[HumanInterrupt]], dict[Any, list]]:
    """The thread's pending rows by interrupt, and every row of their runs by run, read
    once and locked for answering them (the caller holds the thread's lock), unless the
    caller read them with it."""
    pending = HumanInterrupt.Status.PENDING
    groups: dict[str, list[HumanInterrupt]] = {}
    by_run: dict[Any, list[HumanInterrupt]] = {}
    rows = locked.answerable
    if rows is None:
        rows = answer_statements.interrupts_answerable_locked(locked.thread.pk)
    for row in rows:
        by_run.setdefault(row.run_id, []).append(row)
        if row.status == pending:
            groups.setdefault(row.interrupt_id, []).append(row)
    return groups, by_run


def _answered_conflict(thread: Thread, ids: Iterable[str]) -> errors.Conflict | None:
    """A Conflict naming who answered, when `ids` refer to interrupts no longer pending."""
    ids = [str(i) for i in ids]
    rows = [
        row
        for row in thread.interrupts.select_related("responded_by").exclude(
            status=HumanInterrupt.Status.PENDING
        )
        if row.interrupt_id in ids or str(row.pk) in ids
    ]
    if not rows:
        return None
    row = rows[0]
    if row.status == HumanInterrupt.Status.RESOLVED:
        who = row.answered_by or "someone"
        return errors.Conflict(f"Interrupt {row.interrupt_id} was already answered by {who}.")
    return errors.Conflict(f"Interrupt {row.interrupt_id} is {row.status}.")


def _resolve_all(
    *,
    thread: Thread,
    user,
    plan: list[tuple[Any, str, Any]],
    groups: dict[str, list[HumanInterrupt]],
    options: RunOptions | None = None,
    lenient: bool = False,
    partial: bool = False,
    by_run: dict[Any, list[HumanInterrupt]] | None = None,
) -> Run:
    """Answer every row of `plan` in one transaction. `groups` are the thread's pending
    rows as read for the plan (each answer locks and checks its row again, unless
    `by_run`, the rows of their runs by run: the thread and all these rows were read
    locked in the caller's transaction). `options` go into the resume run.

    With `partial`, rows outside the plan may stay pending: the thread resumes once they
    are answered too, and until then the paused run is returned (still interrupted).
    """
    check_storable([args for _, _, args in plan], "An answer")
    pending = {row.pk for rows in groups.values() for row in rows}
    missing = pending - {row.pk for row, _, _ in plan}
    if missing and not partial:
        raise errors.Invalid(
            f"{len(missing)} pending request(s) of this thread are not answered by this "
            "resume; answer every pending interrupt at once (or answer them one by one "
            "with POST /api/v1/interrupts/{id}/decision)."
        )
    run = None
    # All or nothing: any refusal rolls every answer back, so no savepoints are needed.
    with transaction.atomic(savepoint=False):
        for row, response_type, args in plan:
            answered = interrupt_answer(
                interrupt_id=row.pk,
                user=user,
                reply=Reply(response_type=response_type, args=args, lenient=lenient),
                thread_id=thread.pk,
                options=options,
                locked=Locked(thread, row, by_run[row.run_id]) if by_run is not None else None,
                savepoint=False,
            )
            run = answered.resume_run or run
    if run is None and partial and missing:
        paused = plan[0][0].run
        paused.refresh_from_db()
        return paused
    if run is None:  # every answer landed but nothing to resume (all cancelled upstream)
        raise errors.Conflict("Nothing to resume: the thread's interrupts were withdrawn.")
    return run


def is_inbox_form(resume: Any) -> bool:
    """Whether a resume value has the Agent Inbox's shape: a list of HumanResponses, or
    its `{"decisions": [...]}` for the middleware (edits carrying `args`, not
    `edited_action`). The inbox sends every edited field as a string."""
    if isinstance(resume, dict) and set(resume) == {"decisions"}:
        resume = resume["decisions"]
    return (
        isinstance(resume, list)
        and bool(resume)
        and all(isinstance(item, dict) and item.get("type") in _INBOX_TYPES for item in resume)
        and not any("edited_action" in item for item in resume)
    )


_INBOX_TYPES = (*contract.RESPONSE_TYPES, "approve", "reject")


def resume_command(
    *,
    thread: Thread | Locked,
    user,
    resume: Any,
    options: RunOptions | None = None,
    lenient: bool = False,
) -> Run:
    """Answer a thread's pending interrupts from a LangGraph `Command(resume=...)` value.

    `resume` is either one value (when exactly one interrupt is pending) or a map
    {interrupt_id: value}; the interrupt ids are the ones in the thread's `interrupts`.
    Edits are read leniently (strings as the schema's types) when the client asks
    for it or the value has the Agent Inbox's list form. `options` go into the resume
    run. `thread` as `Locked(thread)`: the caller read it with select_for_update in its
    open transaction; the pending rows are then read locked too, once, and answered as
    read.
    """
    lenient = lenient or is_inbox_form(resume)
    by_run = None
    if isinstance(thread, Locked):
        groups, by_run = _pending_locked(thread)
        thread = thread.thread
    else:
        groups = _pending_by_interrupt(thread)
    if resume is None or resume == {} or resume == []:
        raise errors.Invalid(
            "command.resume is empty: send the answer (a HumanResponse {type, args}) or a map "
            "{interrupt_id: answer}; nothing was recorded."
        )
    # A map {interrupt_id: value}; a HumanResponse or decision ({"type": ...}) is one value.
    if (
        isinstance(resume, dict)
        and all(isinstance(k, str) for k in resume)
        and not {"type", "decisions"} & set(resume)
    ):
        known = set(groups)
        if set(resume) <= known:
            lenient = lenient or any(is_inbox_form(v) for v in resume.values())
            plan = [
                a
                for key, value in resume.items()
                for a in answers_for_interrupt(groups[key], value)
            ]
            return _resolve_all(
                thread=thread,
                user=user,
                plan=plan,
                groups=groups,
                options=options,
                lenient=lenient,
                partial=True,  # a map may answer some interrupts; the rest stay pending
                by_run=by_run,
            )
        unknown = [k for k in resume if k not in known]
        if len(unknown) < len(resume) or all(_looks_like_id(k) for k in unknown):
            # Some keys name pending interrupts (or all look like ids): a map with a
            # wrong key, never a value to record.
            conflict = _answered_conflict(thread, unknown)
            if conflict is not None:
                raise conflict
            raise errors.Invalid(
                f"No pending interrupt {unknown[0]!r} on this thread; pending: "
                f"{', '.join(groups) or 'none'}. Nothing was recorded."
            )
    if not groups:
        raise errors.Conflict(
            "This thread has no pending interrupts to resume"
            + (f" (it is {thread.status})." if thread.status != Thread.Status.INTERRUPTED else ".")
        )
    if len(groups) > 1:
        raise errors.Invalid(
            f"This thread has {len(groups)} pending interrupts ({', '.join(groups)}); "
            "resume with a map {interrupt_id: value}."
        )
    (rows,) = groups.values()
    plan = answers_for_interrupt(rows, resume)
    return _resolve_all(
        thread=thread,
        user=user,
        plan=plan,
        groups=groups,
        options=options,
        lenient=lenient,
        by_run=by_run,
    )


def resume_entries(*, thread: Thread, user, entries: dict[str, Any]) -> Run:
    """Answer pending interrupts from AG-UI resume entries {id: payload | CANCELLED}.

    An id is a HumanInterrupt id (what our RUN_FINISHED outcome lists) or a LangGraph
    interrupt id of a single-request interrupt.
    """
    groups = _pending_by_interrupt(thread)
    by_row = {str(row.pk): row for rows in groups.values() for row in rows}
    plan: list[tuple[Any, str, Any]] = []
    unknown = []
    for key, payload in entries.items():
        if key in by_row:
            plan.append((by_row[key], *answer_for(by_row[key], payload)))
        elif key in groups:
            value = None if payload is CANCELLED else payload
            if payload is CANCELLED:
                plan.extend((row, "ignore", None) for row in groups[key])
            else:
                plan.extend(answers_for_interrupt(groups[key], value))
        else:
            unknown.append(key)
    if unknown:
        conflict = _answered_conflict(thread, unknown)
        if conflict is not None:
            raise conflict
        raise errors.Invalid(f"No pending interrupt {unknown[0]!r} on this thread.")
    if not plan:
        raise errors.Invalid("The resume list is empty.")
    return _resolve_all(thread=thread, user=user, plan=plan, groups=groups)
