"""Rule-based automatic decisions: CEL conditions over an interrupt, checked on save.

CEL (cel-python) is a non-Turing-complete, side-effect-free expression language: a
condition can read the variables given to it and nothing else (no eval, no imports,
no I/O). Rules run in precedence order (priority, then id) when a run pauses; the
first live rule that matches and is allowed decides. Dry-run rules only record hits.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
from typing import Any

import celpy
from lark import Token, Tree

from hitl.core import audit
from hitl.core.access import confcache
from hitl.core.decisions.answer import answer_record
from hitl.core.models import DecisionRule, HumanInterrupt, RuleHit, Thread

log = logging.getLogger(__name__)

VARIABLES = ("args", "action", "graph", "group")
MACROS = {"all", "exists", "exists_one", "map", "filter"}
# Global functions a condition may call: CEL's standard ones (size, int, matches, ...).
FUNCTIONS = {name for name in celpy.evaluation.base_functions if name.isidentifier()} | {
    "has",
    "dyn",
}
MAX_CONDITION_CHARS = 2000
OUTCOME_TYPE = {"accept": "accept", "ignore": "ignore", "respond": "response"}


class RuleError(ValueError):
    """A condition that does not parse or names what does not exist; says which."""


# The tree-walking interpreter, never the transpiler (CompiledRunner builds Python and execs it).
_env = celpy.Environment(runner_class=celpy.InterpretedRunner)


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
    """Refuse a condition that does not parse or refers to fields that do not exist."""
    if not condition.strip():
        return
    if len(condition) > MAX_CONDITION_CHARS:
        raise RuleError(f"The condition is longer than {MAX_CONDITION_CHARS} characters.")
    try:
        tree = _env.compile(condition)
    except celpy.CELParseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise RuleError(f"The condition does not parse: {first}") from None
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


@functools.lru_cache(maxsize=256)
def _program(condition: str) -> Any:
    """Parse once per process; programs are immutable and keyed by their text."""
    return _env.program(_env.compile(condition))


def rule_matches(rule: DecisionRule, row: HumanInterrupt, graph: str) -> bool:
    """Whether the rule applies to the row; raises on a condition that fails to evaluate."""
    if rule.graph and rule.graph != graph:
        return False
    if rule.action and not fnmatch.fnmatchcase(row.action, rule.action):
        return False
    if rule.reviewer_group_id and rule.reviewer_group_id != row.reviewer_group_id:
        return False
    if not rule.condition.strip():
        return True
    program = _program(rule.condition)
    activation = {
        "args": celpy.json_to_cel(row.args if isinstance(row.args, dict) else {}),
        "action": celpy.json_to_cel(row.action),
        "graph": celpy.json_to_cel(graph),
        "group": celpy.json_to_cel(row.reviewer_group.name if row.reviewer_group else ""),
    }
    result = program.evaluate(activation)
    if isinstance(result, Exception):
        raise result
    if not isinstance(result, celpy.celtypes.BoolType):
        raise RuleError(f"The condition gave {type(result).__name__}, not true or false.")
    return bool(result)


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


def rules_apply(*, thread: Thread, rows: list[HumanInterrupt]) -> None:
    """Evaluate the active rules on new interrupts; inside run_finish's transaction."""
    if not rows:
        return
    active = confcache.get(
        "rules:active",
        lambda: list(
            DecisionRule.objects.exclude(mode=DecisionRule.Mode.OFF).order_by("priority", "id")
        ),
    )
    if not active:
        return
    for row in rows:
        decided = False
        for rule in active:
            try:
                matched = rule_matches(rule, row, thread.graph)
            except Exception as exc:  # never eval'd code: CEL type errors, missing keys
                log.warning("rule %s failed on interrupt %s: %s", rule.label, row.pk, exc)
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
            if rule.mode == DecisionRule.Mode.DRY_RUN or decided:
                RuleHit.objects.create(
                    rule=rule,
                    rule_version=rule.version,
                    interrupt=row,
                    mode=DecisionRule.Mode.DRY_RUN if rule.mode == "dry_run" else rule.mode,
                    outcome=rule.outcome,
                    skipped="" if rule.mode == "dry_run" else "an earlier rule decided",
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
        thread=thread, row=row, response_type=response_type, args=args, rule=rule, announce=False
    )
    return True
