"""What a run hands its graph: its input, its answers as a LangGraph Command, or a
continuation from a checkpoint (a fork, a breakpoint passed, a redelivered run)."""

from __future__ import annotations

from typing import Any

from langgraph.types import Command, Send

from hitl.core.models import Run
from hitl.core.runs.pauses import BREAKPOINT

# The graph already ended (a redelivered run whose end was checkpointed): nothing to stream.
ALREADY_DONE = object()
_UNSEEN = object()


def _command(run: Run, resume: Any = None) -> Command:
    """The run's LangGraph command: its answers, and a client's goto and update (as
    LangGraph Server maps them: a goto names nodes or sends {node, input})."""
    goto = run.command.get("goto")
    if goto is not None and not isinstance(goto, list):
        goto = [goto]
    update = run.command.get("update")
    if isinstance(update, list) and all(
        isinstance(t, list) and len(t) == 2 and isinstance(t[0], str) for t in update
    ):
        update = [tuple(t) for t in update]
    sends = [g if isinstance(g, str) else Send(g["node"], g.get("input")) for g in goto or ()]
    return Command(resume=resume, update=update, goto=sends or ())


def _answers(run: Run) -> dict[str, Any]:
    """A resume run's answers to the graph's interrupts (a breakpoint's "continue" is no
    answer to the graph: it goes on with no input)."""
    resume = run.input.get("resume") or {}
    return {k: v for k, v in resume.items() if not k.startswith(BREAKPOINT)}


class Breakpoint:
    """A pause at a LangGraph breakpoint, as one request a person continues (accept)."""

    response_schema = None

    def __init__(self, state: Any):
        checkpoint_id = (state.config or {}).get("configurable", {}).get("checkpoint_id", "")
        nodes = list(state.next)
        self.id = f"{BREAKPOINT}{checkpoint_id}"
        self.value = {
            "action_request": {"action": "continue", "args": {"next": nodes}},
            "config": {
                "allow_accept": True,
                "allow_edit": False,
                "allow_respond": False,
                "allow_ignore": False,
            },
            "description": f"Paused at a breakpoint before **{', '.join(nodes)}**. "
            "Accept to continue.",
        }


def _input_before_reading(run: Run) -> Any:
    """The input of a run never leased before (no state to read), else _UNSEEN."""
    if run.first_lease:
        # Never leased before: no attempt of this run can have checkpointed anything.
        # A resume run's values answer the rows its decisions found pending, and only
        # an attempt of this run could have consumed them since (LangGraph passes over
        # an id that is not pending, as a redelivered attempt's read below would).
        if run.kind == Run.Kind.RESUME and run.input.get("resume"):
            answers = _answers(run)
            if answers:
                return _command(run, answers)
            # Only a breakpoint was answered: the graph goes on (LangGraph's None input).
            return _command(run) if run.command else None
        if run.command and run.kind != Run.Kind.RESUME:
            return _command(run)
        if run.kind != Run.Kind.RESUME:
            return None if run.checkpoint_id and not run.input else run.input
    return _UNSEEN


def _input_after_reading(run: Run, state: Any) -> Any:
    mine = (state.metadata or {}).get("hitl_run_id") == str(run.id)
    if run.kind == Run.Kind.RESUME:
        pending = {i.id for i in state.interrupts}
        resume = {k: v for k, v in (run.input.get("resume") or {}).items() if k in pending}
        if resume:
            return _command(run, resume)
    if mine or run.kind == Run.Kind.RESUME:
        return ALREADY_DONE if state.interrupts else None
    if run.command:
        return _command(run)
    if run.checkpoint_id and not run.input:
        return None  # from a checkpoint with no input: continue from it
    return run.input


def graph_input_for(graph: Any, config: dict[str, Any], run: Run) -> Any:
    """What to stream for this run, so a redelivered run continues instead of repeating.

    A checkpoint tagged with this run id means an earlier attempt already made
    progress: continue from it with LangGraph's own resume semantics (input None: the
    saved writes are applied, what is left runs; on a graph that ended nothing runs).
    An empty `state.next` is no proof of the end: a step whose writes were saved before
    its checkpoint (the worker died in between) lists no next node either. Only a
    pause is taken as done. Resume values go only to interrupts still pending.
    """
    known = _input_before_reading(run)
    return known if known is not _UNSEEN else _input_after_reading(run, graph.get_state(config))


async def agraph_input_for(graph: Any, config: dict[str, Any], run: Run) -> Any:
    """graph_input_for on the async checkpointer."""
    known = _input_before_reading(run)
    if known is not _UNSEEN:
        return known
    return _input_after_reading(run, await graph.aget_state(config))


def _fork_point(config: dict[str, Any], run: Run, latest: Any) -> dict[str, Any] | None:
    if (latest.metadata or {}).get("hitl_run_id") == str(run.id):
        return None
    return {**config["configurable"], "checkpoint_id": run.checkpoint_id}


def from_checkpoint(graph: Any, config: dict[str, Any], run: Run) -> dict[str, Any]:
    """The config of a run started from an earlier checkpoint (a fork).

    A redelivered fork that already made progress goes on from its own latest
    checkpoint instead: starting from the fork point again would branch twice.
    """
    configurable = _fork_point(config, run, graph.get_state(config))
    if configurable is None:
        return config
    if not run.input:
        # Continuing a checkpoint re-runs its tasks: on a copy of it (LangGraph's
        # "__copy__" fork) they get new ids, so their interrupts are new ones too.
        forked = graph.update_state({**config, "configurable": configurable}, None, "__copy__")
        configurable["checkpoint_id"] = forked["configurable"]["checkpoint_id"]
    return {**config, "configurable": configurable}


async def afrom_checkpoint(graph: Any, config: dict[str, Any], run: Run) -> dict[str, Any]:
    """from_checkpoint on the async checkpointer."""
    configurable = _fork_point(config, run, await graph.aget_state(config))
    if configurable is None:
        return config
    if not run.input:
        forked = await graph.aupdate_state(
            {**config, "configurable": configurable}, None, "__copy__"
        )
        configurable["checkpoint_id"] = forked["configurable"]["checkpoint_id"]
    return {**config, "configurable": configurable}


def check_ended(state: Any) -> None:
    """Refuse to record an end LangGraph does not report: no pause and nothing left."""
    if not state.interrupts and (state.next or any(not t.error for t in state.tasks)):
        left = ", ".join(state.next) or ", ".join(t.name for t in state.tasks)
        raise RuntimeError(f"The graph stopped before its end (still to run: {left}).")
