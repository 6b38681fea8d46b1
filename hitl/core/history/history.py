"""A thread's checkpoint history, a page at a time, each step told as what happened.

LangGraph keeps, for each checkpoint, the tasks that ran from it and what they wrote
(`StateSnapshot.tasks[].result`) and the interrupts they raised. From those, plus the
HumanInterrupt rows (who decided) and the fork audit rows (who forked or edited), a
step reads "tools ran send_email(to: …) · accepted by rita" rather than a node name
and a checkpoint id. Typed data only: hitl.review renders it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hitl.core.access.summary import args_changes, args_summary, short
from hitl.core.errors import NotFound
from hitl.core.history.branches import Branch, Branches, thread_branches
from hitl.core.history.timetravel import _config, _graph
from hitl.core.live.agui import jsonable
from hitl.core.models import AuditEvent, HumanInterrupt, Thread

HISTORY_PAGE = 10
MAX_CHECKPOINT_ID = 64


@dataclass
class Call:
    name: str
    args: list[tuple[str, str]]
    verb: str  # "proposed" (the model asked for it), "ran" (a tool node ran it), "asked"
    result: str = ""


@dataclass
class Step:
    checkpoint_id: str
    step: int | None
    source: str  # LangGraph's: input | loop | update | fork
    kind: str  # input | node | edit | fork | end
    next: list[str]
    created_at: datetime | None
    run_id: str | None
    values_json: str
    node: str = ""  # the node(s) that ran from this step
    calls: list[Call] = field(default_factory=list)
    said: str = ""  # what a node wrote as text (a model's reply, a request)
    wrote: list[str] = field(default_factory=list)  # other state keys a node wrote
    inputs: list[tuple[str, str]] = field(default_factory=list)
    decisions: list[HumanInterrupt] = field(default_factory=list)
    waiting: int = 0  # interrupts raised here that have no row or no answer yet
    by: str = ""  # who forked or edited the state (kind fork / edit)
    edited: list[str] = field(default_factory=list)
    branch: Branch | None = None


@dataclass
class HistoryPage:
    steps: list[Step]
    more_before: str | None  # the checkpoint id to page on from, when there are older steps
    branches: Branches


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _text(content: Any) -> str:
    if isinstance(content, list):
        content = " ".join(
            str(_get(part, "text") or "") if not isinstance(part, str) else part for part in content
        )
    return short(str(content or "")) if content else ""


def _calls_by_id(values: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    found: dict[str, tuple[str, Any]] = {}
    messages = values.get("messages")
    for message in messages[-20:] if isinstance(messages, list) else []:
        for call in _get(message, "tool_calls") or []:
            if isinstance(call, dict) and call.get("id"):
                found[str(call["id"])] = (str(call.get("name", "")), call.get("args"))
    return found


def _read_task(step: Step, task: Any, calls_by_id: dict[str, tuple[str, Any]]) -> None:
    result = task.result if isinstance(task.result, dict) else {}
    messages = result.get("messages")
    if messages is not None and not isinstance(messages, list):
        messages = [messages]
    for message in messages or []:
        kind = str(_get(message, "type") or _get(message, "role") or "")
        if kind in ("ai", "assistant", "AIMessageChunk"):
            for call in _get(message, "tool_calls") or []:
                if isinstance(call, dict):
                    name = str(call.get("name", ""))
                    step.calls.append(Call(name, args_summary(call.get("args")), "proposed"))
            step.said = step.said or _text(_get(message, "content"))
        elif kind == "tool":
            name, args = calls_by_id.get(str(_get(message, "tool_call_id") or ""), ("", None))
            name = str(_get(message, "name") or name or "tool")
            step.calls.append(
                Call(name, args_summary(args), "ran", result=_text(_get(message, "content")))
            )
        elif kind in ("human", "user"):
            step.said = step.said or _text(_get(message, "content"))
    step.wrote += [str(key) for key in result if key != "messages" and str(key) not in step.wrote]


def _declined(row: HumanInterrupt) -> bool:
    """A tool call skipped or answered in its place (a clarification's answer is its result)."""
    if row.response_type == HumanInterrupt.ResponseType.IGNORE:
        return True
    raw = row.raw_value if isinstance(row.raw_value, dict) else {}
    asks = row.action == "ask_clarification" or isinstance(raw.get("clarification"), dict)
    return row.response_type == HumanInterrupt.ResponseType.RESPONSE and not asks


def _edited_args(row: HumanInterrupt) -> Any | None:
    """The args a reviewer's edit sent the tool (None when the answer was not an edit)."""
    answer = row.response_args
    if row.response_type != HumanInterrupt.ResponseType.EDIT or not isinstance(answer, dict):
        return None
    return answer.get("args", answer)


def _label(step: Step, snapshot: Any, rows: dict[str, list[HumanInterrupt]]) -> None:
    values = snapshot.values if isinstance(snapshot.values, dict) else {}
    calls_by_id = _calls_by_id(values)
    for task in snapshot.tasks:
        if task.name == "__start__":
            result = task.result if isinstance(task.result, dict) else {}
            step.inputs = args_summary(jsonable(result))
            continue
        _read_task(step, task, calls_by_id)
        for pending in task.interrupts:
            found = rows.get(str(pending.id), [])
            step.decisions += found
            step.waiting += sum(1 for r in found if r.status == HumanInterrupt.Status.PENDING)
            step.waiting += 0 if found else 1
            ran = {call.name: call for call in step.calls}
            for row in found:
                waiting = row.status == HumanInterrupt.Status.PENDING
                edited = _edited_args(row)
                if edited is not None:
                    row.changed_args = args_changes(row.args, edited)
                if row.action and row.action not in ran:
                    verb = "asks to run" if waiting else "asked to run"
                    step.calls.append(Call(row.action, args_summary(row.args), verb))
                elif row.action and _declined(row):
                    ran[row.action].verb = "did not run"  # its result says why
                elif row.action and edited is not None and ran[row.action].verb == "ran":
                    # The model proposed other args: the tool ran with the reviewer's.
                    ran[row.action].args = args_summary(edited)
    step.node = ", ".join(t.name for t in snapshot.tasks if t.name != "__start__")


def thread_history_page(
    thread: Thread, *, before: str | None = None, limit: int = HISTORY_PAGE, with_values=False
) -> HistoryPage:
    """Up to `limit` steps, newest first, older than the step `before` when given; each
    step's whole state only `with_values` (a page loads them one by one when opened)."""
    branches = thread_branches(thread)
    try:
        graph = _graph(thread)
    except Exception:  # a graph that no longer loads: no history to show
        return HistoryPage([], None, branches)
    older = _config(thread, before) if before else None
    snapshots = list(graph.get_state_history(_config(thread), before=older, limit=limit + 1))
    more = len(snapshots) > limit
    snapshots = snapshots[:limit]

    asked = {str(i.id) for s in snapshots for t in s.tasks for i in t.interrupts}
    rows: dict[str, list[HumanInterrupt]] = {}
    for row in (
        HumanInterrupt.objects.filter(thread=thread, interrupt_id__in=asked)
        .select_related("responded_by")
        .order_by("position")
    ):
        rows.setdefault(row.interrupt_id, []).append(row)
    forks = list(
        AuditEvent.objects.filter(thread=thread, kind=AuditEvent.Kind.THREAD_FORKED)
        .select_related("actor")
        .order_by("created_at")
    )
    # A state edit is written as a checkpoint (`start_from`) on the chosen step. The fork's
    # run copies its start into a "fork" checkpoint, a sibling of it: the same parent.
    starts: dict[str, list[AuditEvent]] = {}
    siblings: dict[str, list[AuditEvent]] = {}
    fork_parents = {
        str((s.parent_config or {}).get("configurable", {}).get("checkpoint_id"))
        for s in snapshots
        if (s.metadata or {}).get("source") == "fork"
    }
    for event in forks:
        start = str((event.data or {}).get("start_from"))
        starts.setdefault(start, []).append(event)
        if fork_parents:
            siblings.setdefault(_parent_of(graph, thread, start), []).append(event)

    steps = []
    for snapshot in snapshots:
        metadata = snapshot.metadata or {}
        checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
        run_id = metadata.get("hitl_run_id")
        source = str(metadata.get("source") or "")
        parent = (snapshot.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        when = _when(snapshot.created_at)
        edit = _latest(starts.get(checkpoint_id), when) if source == "update" else None
        fork = _latest(siblings.get(str(parent)), when) if source == "fork" else None
        if (edit or fork) and not run_id:
            run_id = str((edit or fork).run_id)  # written before the fork's run wrote any
        step = Step(
            checkpoint_id=checkpoint_id,
            step=metadata.get("step"),
            source=source,
            kind="node",
            next=list(snapshot.next),
            created_at=when,
            run_id=run_id,
            values_json=(
                json.dumps(jsonable(snapshot.values), indent=2, default=str) if with_values else ""
            ),
            branch=branches.of_run(run_id),
        )
        _label(step, snapshot, rows)
        if source == "input":
            step.kind = "input"
        elif edit is not None and edit.data.get("edited"):
            step.kind, step.by, step.edited = "edit", _who(edit), list(edit.data["edited"])
        elif fork is not None:
            step.kind, step.by = "fork", _who(fork)
        elif not step.next:
            step.kind = "end"
        steps.append(step)
    return HistoryPage(steps, steps[-1].checkpoint_id if more and steps else None, branches)


def thread_step_state(thread: Thread, checkpoint_id: str) -> str:
    """The state at one step of the thread, as indented JSON."""
    graph = _graph(thread)
    config = _config(thread, checkpoint_id)
    if graph.checkpointer.get_tuple(config) is None:
        raise NotFound("This thread has no such step.")
    return json.dumps(jsonable(graph.get_state(config).values), indent=2, default=str)


def _parent_of(graph, thread: Thread, checkpoint_id: str) -> str:
    found = graph.checkpointer.get_tuple(_config(thread, checkpoint_id))
    parent = found.parent_config if found is not None else None
    return str((parent or {}).get("configurable", {}).get("checkpoint_id"))


def _latest(events: list[AuditEvent] | None, when: datetime | None) -> AuditEvent | None:
    """The last fork recorded before a checkpoint was written (forks from one step share
    their start)."""
    found = [e for e in events or [] if when is None or e.created_at <= when]
    return found[-1] if found else (events[-1] if events else None)


def _who(event: AuditEvent) -> str:
    return event.actor.get_username() if event.actor else "someone"


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None
