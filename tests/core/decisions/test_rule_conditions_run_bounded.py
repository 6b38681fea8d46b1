"""Rule conditions run bounded: no backtracking parse, a time budget, nesting refused on
save, and conditions evaluated before the run's locks are taken."""

from __future__ import annotations

import time

import celpy
import pytest
from django.db import connection

from hitl.core.decisions import rules
from hitl.core.models import AuditEvent, DecisionRule, RuleHit
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = pytest.mark.django_db

# On cel-python's own duration() (a backtracking regex) this string held a worker for
# about 30 s; each further "a" doubles it.
HOSTILE = "a" * 28 + "!"
FAST = 3.0  # seconds: the whole pause, rules included, on a loaded 2-core machine


def rule(name: str, outcome: str = "accept", **fields) -> DecisionRule:
    fields.setdefault("mode", DecisionRule.Mode.LIVE)
    return DecisionRule.objects.create(name=name, outcome=outcome, **fields)


def timed_pause(requester, *values):
    started = time.monotonic()
    thread, rows = open_interrupts(user=requester, values=list(values))
    elapsed = time.monotonic() - started
    for row in rows:
        row.refresh_from_db()
    return elapsed, thread, rows


def assert_failed_to_people(row, rule_name: str, words: str) -> None:
    assert row.status == "pending"
    hit = RuleHit.objects.get(rule__name=rule_name, interrupt=row)
    assert not hit.applied
    assert words in hit.error
    failed = AuditEvent.objects.get(interrupt=row, kind="interrupt.rule_failed")
    assert failed.data["rule"] == rule_name and words in failed.data["error"]


def test_a_hostile_duration_literal_finishes_fast_and_goes_to_people(requester):
    # Saved before the save-time checks existed (or by a migration): it still runs bounded.
    rule("hostile-literal", condition=f'duration("{HOSTILE}") == duration("1s")')
    elapsed, _, [row] = timed_pause(requester, human_interrupt())
    assert elapsed < FAST, elapsed
    assert_failed_to_people(row, "hostile-literal", "invalid duration")


def test_a_hostile_duration_argument_finishes_fast_and_goes_to_people(requester):
    rule("long-waits", "ignore", action="wait", condition='duration(args.delay) > duration("2h")')
    elapsed, _, [row] = timed_pause(requester, human_interrupt("wait", {"delay": HOSTILE}))
    assert elapsed < FAST, elapsed
    assert_failed_to_people(row, "long-waits", "invalid duration")


def test_a_failed_rule_lets_no_later_rule_decide(requester):
    """The agent controls the args: making a stricter rule fail must not reach a laxer one."""
    rule("long-waits", "ignore", action="wait", condition='duration(args.delay) > duration("2h")')
    rule("accept-the-rest", "accept", action="wait", priority=200)
    _, _, [row] = timed_pause(requester, human_interrupt("wait", {"delay": HOSTILE}))
    assert row.status == "pending"
    later = RuleHit.objects.get(rule__name="accept-the-rest")
    assert (later.applied, later.skipped) == (False, "an earlier rule failed")


@pytest.mark.parametrize(
    ("delay", "decided"),
    [("3h", True), ("1h30m", False), ("2.5h", True), ("-3h", False), ("90000s", True)],
)
def test_ordinary_durations_still_compare(requester, delay, decided):
    rule("long-waits", "ignore", action="wait", condition='duration(args.delay) > duration("2h")')
    _, _, [row] = timed_pause(requester, human_interrupt("wait", {"delay": delay}))
    assert (row.status == "resolved") is decided
    assert not RuleHit.objects.exclude(error="").exists()


def test_timestamps_parse_without_backtracking(requester):
    rule(
        "old-deadlines",
        action="wait",
        condition='timestamp(args.until) < timestamp("2030-01-01T00:00:00Z")',
    )
    _, _, [ok, hostile] = timed_pause(
        requester,
        human_interrupt("wait", {"until": "2029-05-01T10:00:00.5+02:00"}),
        human_interrupt("wait", {"until": "2" * 40 + "!"}),
    )
    assert ok.status == "resolved"
    assert hostile.status == "pending"
    assert "invalid timestamp" in RuleHit.objects.get(interrupt=hostile).error


def test_a_condition_over_its_time_budget_is_an_error_on_that_rule(requester, settings):
    settings.HITL_RULE_BUDGET_MS = 50
    # No nesting, under 2,000 characters: 250 numbers through 40 chained maps, seconds
    # of interpreter work.
    numbers = ", ".join(str(n) for n in range(250))
    condition = f"[{numbers}]" + ".map(x, x * 2 + 1)" * 40 + ".size() > 0"
    rules.condition_check(condition)  # a valid condition: only its cost is the problem
    rule("chained", condition=condition)
    elapsed, _, [row] = timed_pause(requester, human_interrupt())
    assert elapsed < FAST, elapsed
    assert_failed_to_people(row, "chained", "took longer than 50 ms")


class WaitsWhenCompared(celpy.celtypes.StringType):
    """A string whose comparison waits 0.2 s without working: a core busy elsewhere."""

    __hash__ = celpy.celtypes.StringType.__hash__

    def __eq__(self, other):
        time.sleep(0.2)
        return super().__eq__(other)


def test_the_budget_counts_the_work_done_not_the_time_waited(settings):
    """On a busy machine a cheap condition may wait long for a core: that is not its
    work, and it does not fail the rule (it did, on a loaded CI machine)."""
    settings.HITL_RULE_BUDGET_MS = 50
    activation = rules._activation("wait", {}, "approval", "")
    activation["action"] = WaitsWhenCompared("wait")
    started = time.monotonic()
    assert rules._evaluate('action == "wait" && action == "wait"', activation) is True
    assert time.monotonic() - started > 0.4  # waited far past the budget, and passed


def test_args_too_large_to_read_in_the_budget_are_an_error_on_the_rule(requester, settings):
    settings.HITL_RULE_BUDGET_MS = 50
    rule("every-item", action="batch", condition="args.items.size() > 0")
    items = list(range(200_000))
    _, _, [row] = timed_pause(requester, human_interrupt("batch", {"items": items}))
    assert_failed_to_people(row, "every-item", "too large to read in 50 ms")


@pytest.mark.parametrize(
    "condition",
    [
        "[1, 2].map(a, [1, 2].map(b, a + b)).size() > 0",
        "[1].map(a, [2].map(b, [3].map(c, a * b * c))).size() > 0",
        "args.items.all(a, args.items.exists(b, b == a))",
        "[1].filter(a, [[1]].all(b, b.exists(c, c == a))).size() > 0",
    ],
)
def test_nested_macros_are_refused_on_save(condition):
    with pytest.raises(rules.RuleError, match="inside another"):
        rules.condition_check(condition)


def test_deeply_nested_expressions_are_refused_on_save():
    with pytest.raises(rules.RuleError, match="nested too deeply"):
        rules.condition_check("(" * 40 + "true" + ")" * 40)
    with pytest.raises(rules.RuleError, match="nested too deeply"):
        rules.condition_check("!" * 300 + "true")


def test_a_hostile_duration_literal_is_refused_on_save():
    with pytest.raises(rules.RuleError, match="invalid duration"):
        rules.condition_check(f'duration("{HOSTILE}") == duration("1s")')


def test_ordinary_conditions_still_save():
    rules.condition_check('duration("1h30m") < duration("2h") && args.to.size() > 0')
    rules.condition_check("[1, 2].map(n, n * 2).all(m, m > 0)")  # chained, not nested
    rules.condition_check('args.to.endsWith("@ourcompany.com") || (args.copies > 2)')


@pytest.mark.django_db(transaction=True)
def test_conditions_are_evaluated_before_the_runs_locks_are_taken(
    requester, monkeypatch, manual_runs
):
    # manual_runs: the run is not also sent to an in-process worker racing this one.
    rule("long-waits", "ignore", action="wait", condition='duration(args.delay) > duration("2h")')
    seen: list[bool] = []
    real = rules._evaluate

    def watched(*args, **kwargs):
        seen.append(connection.in_atomic_block)
        return real(*args, **kwargs)

    monkeypatch.setattr(rules, "_evaluate", watched)
    _, _, [row] = timed_pause(requester, human_interrupt("wait", {"delay": "3h"}))
    assert row.status == "resolved"
    assert seen == [False]
