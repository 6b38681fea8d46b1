"""Rule-based automatic decisions: CEL conditions over an interrupt, checked on save.

CEL (cel-python) is a non-Turing-complete, side-effect-free expression language: a
condition can read the variables given to it and nothing else (no eval, no imports,
no I/O). Rules run in precedence order (priority, then id) when a run pauses; the
first live rule that matches and is allowed decides. Dry-run rules only record hits.

Conditions run bounded: on save a condition is refused when it is long, nested deeply
or runs a macro inside another (each level multiplies the work); at run time each
evaluation has a time budget (HITL_RULE_BUDGET_MS) of the evaluating thread's CPU time,
checked at every node the interpreter visits (CPU, not wall-clock, time: on a busy
machine a condition waiting for a core is not a condition doing too much work), and the
agent-controlled strings that cel-python would parse with a backtracking regex
(durations, timestamps) are checked with RE2 first. Run-time
conditions are evaluated before run_finish takes the thread's and run's locks.
"""

from __future__ import annotations

import datetime
import fnmatch
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import celpy
import re2
from django.conf import settings
from lark import Token, Tree

from hitl.core import audit
from hitl.core.access import confcache
from hitl.core.decisions.answer import Reply, answer_record
from hitl.core.models import DecisionRule, HumanInterrupt, RuleHit, Thread
from hitl.core.runs.options import Locked

log = logging.getLogger(__name__)

VARIABLES = ("args", "action", "graph", "group")
MACROS = {"all", "exists", "exists_one", "map", "filter"}
# Global functions a condition may call: CEL's standard ones (size, int, matches, ...).
FUNCTIONS = {name for name in celpy.evaluation.base_functions if name.isidentifier()} | {
    "has",
    "dyn",
}
MAX_CONDITION_CHARS = 2000
# Levels of the parse tree: an ordinary condition has 20 to 40; each pair of
# parentheses adds about ten.
MAX_TREE_DEPTH = 150
MAX_PARSED_CHARS = 100  # a duration or timestamp string longer than this is refused
OUTCOME_TYPE = {"accept": "accept", "ignore": "ignore", "respond": "response"}


class RuleError(ValueError):
    """A condition that does not parse or names what does not exist; says which."""


class RuleTimeout(Exception):
    """A condition ran past its budget. Not a ValueError: cel-python turns those into
    CEL error values that `||` and `&&` may swallow; this one must stop the evaluation."""


# --- what cel-python would parse with Python's backtracking `re` ------------------------

# Go's time.ParseDuration syntax (what CEL specifies), plus cel-python's "d".
_DURATION = re2.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h|d))+")
_DURATION_PART = re2.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h|d)")
_TIMESTAMP = re2.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _parse_duration(text: str) -> datetime.timedelta:
    """A CEL duration string ("1h30m", "-1.5s"), parsed in linear time; ValueError if not."""
    if len(text) > MAX_PARSED_CHARS or not _DURATION.fullmatch(text):
        raise ValueError(f"invalid duration {text[:40]!r}")
    sign = -1.0 if text.startswith("-") else 1.0
    seconds = sign * sum(
        float(m.group(1)) * celpy.celtypes.DurationType.scale[m.group(2)]
        for m in _DURATION_PART.finditer(text.lstrip("+-"))
    )
    if abs(seconds) > celpy.celtypes.DurationType.MaxSeconds:
        raise ValueError(f"duration out of range {text[:40]!r}")
    return datetime.timedelta(seconds=seconds)


def _parse_timestamp(text: str) -> datetime.datetime:
    """An RFC 3339 timestamp, checked in linear time; ValueError if not."""
    if len(text) > MAX_PARSED_CHARS or not _TIMESTAMP.fullmatch(text):
        raise ValueError(f"invalid timestamp {text[:40]!r}")
    return datetime.datetime.fromisoformat(text.upper().replace(" ", "T"))


def _cel_duration(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return celpy.celtypes.DurationType(_parse_duration(value))
        except ValueError as exc:
            return celpy.CELEvalError(str(exc))
    return celpy.celtypes.DurationType(value)  # a duration or seconds: no parsing


def _cel_timestamp(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return celpy.celtypes.TimestampType(_parse_timestamp(value))
        except ValueError as exc:
            return celpy.CELEvalError(str(exc))
    return celpy.celtypes.TimestampType(value)


# cel-python's own duration() and timestamp() parse with backtracking regexes (a
# 40-character argument held a worker for minutes); matches() already uses RE2.
SAFE_FUNCTIONS = {"duration": _cel_duration, "timestamp": _cel_timestamp}
PARSED_LITERALS = {"duration": _parse_duration, "timestamp": _parse_timestamp}


# --- a time budget ---------------------------------------------------------------------

# This thread's CPU time: what a condition costs its worker, whatever else is running.
_clock = time.thread_time


class _Evaluator(celpy.evaluation.Evaluator):
    """cel-python's tree-walking interpreter that stops at a deadline."""

    def __init__(self, ast: Tree, activation: Any, deadline: float) -> None:
        super().__init__(ast, activation)
        self.deadline = deadline

    def sub_evaluator(self, ast: Tree) -> _Evaluator:
        # Macro bodies (map, all, ...) run in sub-evaluators: the same deadline.
        return _Evaluator(ast, self.activation, self.deadline)

    def _visit_tree(self, tree: Tree) -> Any:
        if _clock() > self.deadline:
            raise RuleTimeout
        return super()._visit_tree(tree)


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any, budget: float | None = None) -> Any:
        deadline = _clock() + (budget if budget is not None else _budget())
        return _Evaluator(self.ast, self.new_activation(), deadline).evaluate(context)


def _budget() -> float:
    return settings.HITL_RULE_BUDGET_MS / 1000


# The tree-walking interpreter, never the transpiler (CompiledRunner builds Python and execs it).
_env = celpy.Environment(runner_class=_Runner)


def _idents(tree: Tree) -> tuple[set[str], set[str], set[str], set[str]]:
    """Top-level names, `args.<field>` fields, names bound by macros, and functions called."""
    functions: set[str] = set()
    names: set[str] = set()
    fields: set[str] = set()
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "primary" and node.children and isinstance(node.children[0], Tree):
            child = node.children[0]
            if child.data == "ident" and isinstance(child.children[0], Token):
                names.add(str(child.children[0]))
            if child.data == "ident_arg" and isinstance(child.children[0], Token):
                functions.add(str(child.children[0]))
        if node.data in ("member_dot", "member_dot_arg") and len(node.children) >= 2:
            inner, name = node.children[0], node.children[1]
            if node.data == "member_dot" and _is_ident(inner, "args"):
                fields.add(str(name))
            if node.data == "member_dot_arg" and str(name) in MACROS and len(node.children) > 2:
                exprs = node.children[2]
                first = exprs.children[0] if isinstance(exprs, Tree) and exprs.children else None
                if first is not None:
                    for sub in first.iter_subtrees():
                        if sub.data == "ident":
                            bound.add(str(sub.children[0]))
    return names, fields, bound, functions


def _is_ident(node: Any, name: str) -> bool:
    if not isinstance(node, Tree) or node.data != "member" or not node.children:
        return False
    primary = node.children[0]
    return (
        isinstance(primary, Tree)
        and primary.data == "primary"
        and isinstance(primary.children[0], Tree)
        and primary.children[0].data == "ident"
        and str(primary.children[0].children[0]) == name
    )


def known_fields(action_pattern: str) -> set[str] | None:
    """The argument names actions matching the pattern were seen with (None: unknown)."""
    if not action_pattern:
        return None
    seen: set[str] = set()
    rows = (
        HumanInterrupt.objects.exclude(action="")
        .order_by("-created_at")
        .values("action", "args", "args_schema")[:500]
    )
    found = False
    for row in rows:
        if not fnmatch.fnmatchcase(row["action"], action_pattern):
            continue
        found = True
        schema = row["args_schema"] or {}
        seen.update((schema.get("properties") or {}).keys())
        seen.update((row["args"] or {}).keys() if isinstance(row["args"], dict) else ())
    return seen if found else None


def condition_check(condition: str, *, action: str = "") -> None:
    """Refuse a condition that does not parse, refers to fields that do not exist, or
    could run long: nested too deeply, a macro inside another, a bad literal duration."""
    if not condition.strip():
        return
    if len(condition) > MAX_CONDITION_CHARS:
        raise RuleError(f"The condition is longer than {MAX_CONDITION_CHARS} characters.")
    try:
        tree = _env.compile(condition)
    except celpy.CELParseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise RuleError(f"The condition does not parse: {first}") from None
    _check_shape(tree)
    names, fields, bound, functions = _idents(tree)
    strange = sorted(functions - FUNCTIONS)
    if strange:
        raise RuleError(f"Unknown function {strange[0]!r} in the condition.")
    unknown = sorted(names - set(VARIABLES) - bound)
    if unknown:
        raise RuleError(
            f"Unknown name {unknown[0]!r} in the condition; "
            f"a condition can use {', '.join(VARIABLES)}."
        )
    known = known_fields(action)
    missing = sorted(fields - known) if known is not None else []
    if missing:
        raise RuleError(
            f"{action!r} has no argument {missing[0]!r}; "
            f"its arguments are {', '.join(sorted(known)) or 'none'}."
        )


def _macro_body(node: Tree) -> Tree | None:
    """The expressions of a macro call (`list.map(x, body)`), or None for anything else."""
    if node.data != "member_dot_arg" or len(node.children) < 3:
        return None
    if str(node.children[1]) not in MACROS or not isinstance(node.children[2], Tree):
        return None
    return node.children[2]


def _check_shape(tree: Tree) -> None:
    """Refuse what would make evaluation long whatever the budget: deep nesting (the
    interpreter recurses per level), a macro inside another's body (each level multiplies
    the work by the length of a list), and literal durations/timestamps that do not parse."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise RuleError("The condition is nested too deeply; split it or simplify it.")
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))
        body = _macro_body(node)
        if body is not None and any(_macro_body(sub) is not None for sub in body.iter_subtrees()):
            raise RuleError(
                f"A macro ({', '.join(sorted(MACROS))}) cannot run inside another: "
                "the work would multiply with each level."
            )
        if node.data == "ident_arg" and str(node.children[0]) in PARSED_LITERALS:
            literal = _string_literal(node.children[1] if len(node.children) > 1 else None)
            if literal is not None:
                try:
                    PARSED_LITERALS[str(node.children[0])](literal)
                except ValueError as exc:
                    raise RuleError(f"The condition has an {exc}.") from None


def _string_literal(arguments: Any) -> str | None:
    """The text of a call's only argument when it is a string literal."""
    if not isinstance(arguments, Tree):
        return None
    tokens = list(arguments.scan_values(lambda v: isinstance(v, Token)))
    if len(tokens) != 1 or tokens[0].type not in ("STRING_LIT", "MLSTRING_LIT"):
        return None
    return str(celpy.evaluation.celstr(tokens[0]))


@functools.lru_cache(maxsize=256)
def _program(condition: str) -> Any:
    """Parse once per process; programs are immutable and keyed by their text."""
    return _env.program(_env.compile(condition), functions=SAFE_FUNCTIONS)


def _activation(action: str, args: Any, graph: str, group: str) -> dict[str, Any]:
    """The condition's variables. Converting args costs time by their size (which the
    agent chooses): it has the same budget as one evaluation."""
    deadline = _clock() + _budget()
    try:
        converted = _to_cel(args if isinstance(args, dict) else {}, deadline)
    except RuleTimeout:
        raise RuleError(
            f"The interrupt's args are too large to read in {round(_budget() * 1000)} ms."
        ) from None
    return {
        "args": converted,
        "action": celpy.celtypes.StringType(action),
        "graph": celpy.celtypes.StringType(graph),
        "group": celpy.celtypes.StringType(group),
    }


def _to_cel(value: Any, deadline: float) -> Any:
    """celpy.json_to_cel for JSON values, checking the deadline as it goes."""
    count = 0

    def convert(item: Any) -> Any:
        nonlocal count
        count += 1
        if count % 512 == 0 and _clock() > deadline:
            raise RuleTimeout
        if isinstance(item, dict):
            return celpy.celtypes.MapType(
                {celpy.celtypes.StringType(k): convert(v) for k, v in item.items()}
            )
        if isinstance(item, list):
            return celpy.celtypes.ListType([convert(v) for v in item])
        return celpy.json_to_cel(item)

    return convert(value)


def _evaluate(condition: str, activation: dict[str, Any]) -> bool:
    """The condition's value on one interrupt, within the budget; raises on any failure."""
    budget = _budget()
    try:
        result = _program(condition).evaluate(activation, budget)
    except RuleTimeout:
        raise RuleError(
            f"The condition took longer than {round(budget * 1000)} ms and was stopped."
        ) from None
    except celpy.CELEvalError as exc:
        raise RuleError(_cel_error_text(exc)) from None
    if isinstance(result, Exception):
        raise RuleError(_cel_error_text(result))
    if not isinstance(result, celpy.celtypes.BoolType):
        raise RuleError(f"The condition gave {type(result).__name__}, not true or false.")
    return bool(result)


def _cel_error_text(exc: Exception) -> str:
    if isinstance(exc, celpy.CELEvalError) and exc.args and isinstance(exc.args[0], str):
        cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
        return f"{exc.args[0]}{cause}"
    return str(exc)


def _applies(rule: DecisionRule, action: str, group_id: int | None, graph: str) -> bool:
    """Whether the rule's graph, action pattern and reviewer group fit (no condition)."""
    if rule.graph and rule.graph != graph:
        return False
    if rule.action and not fnmatch.fnmatchcase(action, rule.action):
        return False
    return not (rule.reviewer_group_id and rule.reviewer_group_id != group_id)


@dataclass
class Evaluated:
    """Conditions evaluated before run_finish took its locks: the active rules as read
    then, and per (condition, interrupt, position, group) the result or the error."""

    active: list[DecisionRule]
    results: dict[tuple[str, str, int, str], bool | RuleError] = field(default_factory=dict)


def active_rules() -> list[DecisionRule]:
    return confcache.get(
        "rules:active",
        lambda: list(
            DecisionRule.objects.exclude(mode=DecisionRule.Mode.OFF).order_by("priority", "id")
        ),
    )


def conditions_evaluate(*, graph: str, requests: list[tuple[str, int, str, Any, Any]]) -> Evaluated:
    """Evaluate every active rule's condition on requests (interrupt id, position,
    action, args, reviewer group) before any lock is taken: a slow condition then holds
    no row lock, only its worker, and only for its budget."""
    evaluated = Evaluated(active=active_rules())
    activations: dict[tuple[str, int, str], dict[str, Any] | RuleError] = {}
    for rule in evaluated.active:
        if not rule.condition.strip():
            continue
        for interrupt_id, position, action, args, group in requests:
            if not _applies(rule, action, group.pk if group else None, graph):
                continue
            name = group.name if group else ""
            key = (rule.condition, interrupt_id, position, name)
            if key in evaluated.results:
                continue
            if (interrupt_id, position, name) not in activations:
                try:
                    activations[interrupt_id, position, name] = _activation(
                        action, args, graph, name
                    )
                except RuleError as exc:
                    activations[interrupt_id, position, name] = exc
            activation = activations[interrupt_id, position, name]
            try:
                if isinstance(activation, RuleError):
                    raise activation
                evaluated.results[key] = _evaluate(rule.condition, activation)
            except Exception as exc:  # never eval'd code: CEL type errors, missing keys
                evaluated.results[key] = exc if isinstance(exc, RuleError) else RuleError(str(exc))
    return evaluated


def rule_matches(
    rule: DecisionRule, row: HumanInterrupt, graph: str, evaluated: Evaluated | None = None
) -> bool:
    """Whether the rule applies to the row; raises on a condition that fails to evaluate."""
    if not _applies(rule, row.action, row.reviewer_group_id, graph):
        return False
    if not rule.condition.strip():
        return True
    group = row.reviewer_group.name if row.reviewer_group else ""
    key = (rule.condition, row.interrupt_id, row.position, group)
    result = evaluated.results.get(key) if evaluated is not None else None
    if result is None:  # not evaluated beforehand (a caller without it): bounded anyway
        return _evaluate(rule.condition, _activation(row.action, row.args, graph, group))
    if isinstance(result, Exception):
        raise result
    return result


def _refusal(rule: DecisionRule, row: HumanInterrupt) -> str:
    """Why a live rule may not decide this row ('' if it may)."""
    response_type = OUTCOME_TYPE[rule.outcome]
    if response_type not in row.allowed_types:
        return f"the interrupt's config does not allow {response_type}"
    if row.approvals_required > 1:
        policy = row.approval_policy or {}
        if response_type == "accept" and not policy.get("rule_counts_as_approval"):
            return "four-eyes: rules do not count as approvals here"
        if response_type != "accept" and not policy.get("reject_ends", True):
            return "four-eyes: a refusal does not end this interrupt"
    return ""


def rules_apply(
    *, thread: Thread, rows: list[HumanInterrupt], evaluated: Evaluated | None = None
) -> None:
    """Apply the active rules to new interrupts; inside run_finish's transaction, with
    the conditions evaluated before it (`conditions_evaluate`)."""
    if not rows:
        return
    active = evaluated.active if evaluated is not None else active_rules()
    if not active:
        return
    for row in rows:
        decided = False
        # A live rule that failed on this row leaves it to people: no later (laxer) rule
        # decides, or an agent could skip a strict rule by sending args that break it.
        failed = False
        for rule in active:
            try:
                matched = rule_matches(rule, row, thread.graph, evaluated)
            except Exception as exc:  # never eval'd code: CEL type errors, missing keys
                log.warning("rule %s failed on interrupt %s: %s", rule.label, row.pk, exc)
                failed = failed or rule.mode == DecisionRule.Mode.LIVE
                RuleHit.objects.create(
                    rule=rule,
                    rule_version=rule.version,
                    interrupt=row,
                    mode=rule.mode,
                    outcome=rule.outcome,
                    error=str(exc)[:1000],
                )
                audit.audit_record(
                    kind=audit.Kind.INTERRUPT_RULE_FAILED,
                    thread=thread,
                    interrupt=row,
                    data={"rule": rule.name, "rule_version": rule.version, "error": str(exc)[:500]},
                )
                continue
            if not matched:
                continue
            if rule.mode == DecisionRule.Mode.DRY_RUN or decided or failed:
                skipped = ""
                if rule.mode != DecisionRule.Mode.DRY_RUN:
                    skipped = "an earlier rule decided" if decided else "an earlier rule failed"
                RuleHit.objects.create(
                    rule=rule,
                    rule_version=rule.version,
                    interrupt=row,
                    mode=DecisionRule.Mode.DRY_RUN if rule.mode == "dry_run" else rule.mode,
                    outcome=rule.outcome,
                    skipped=skipped,
                )
                continue
            refusal = _refusal(rule, row)
            hit = RuleHit.objects.create(
                rule=rule,
                rule_version=rule.version,
                interrupt=row,
                mode=rule.mode,
                outcome=rule.outcome,
                skipped=refusal,
            )
            if refusal:
                continue
            decided = _decide(thread=thread, row=row, rule=rule)
            hit.applied = True
            hit.save(update_fields=["applied"])


def _decide(*, thread: Thread, row: HumanInterrupt, rule: DecisionRule) -> bool:
    """Make the rule's decision on the row; True when the rule answered it (with four-eyes,
    its one approval counts and people give the rest)."""
    response_type = OUTCOME_TYPE[rule.outcome]
    args: Any = None
    if response_type == "response":
        args = rule.response_text or f"Answered by rule {rule.label}."
    # The pause that made the row announces it with its new status (run_finish).
    answer_record(
        locked=Locked(thread, row),
        reply=Reply(response_type=response_type, args=args),
        rule=rule,
        announce=False,
    )
    return True
