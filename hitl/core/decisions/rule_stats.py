"""What decision rules did: hits, live decisions, errors, dry-run agreement, time saved."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hitl.core.models import AuditEvent, DecisionRule, HumanInterrupt, RuleHit

# A rule's outcome and the human decision type that agrees with it.
AGREES = {"accept": "accept", "ignore": "ignore", "respond": "response"}
WOULD_HAVE = {"accept": "accepted", "ignore": "ignored", "respond": "answered"}


def dry_run_opinions(rows: list[HumanInterrupt]) -> dict[Any, list[str]]:
    """What the dry-run rules that matched each interrupt would have done with it, as the
    card says it ("Rule internal-mail v2 would have accepted this."): one query for all."""
    out: dict[Any, list[str]] = {row.pk: [] for row in rows}
    hits = (
        RuleHit.objects.filter(interrupt__in=rows, mode=DecisionRule.Mode.DRY_RUN, error="")
        .select_related("rule")
        .order_by("created_at", "id")
    )
    for hit in hits:
        words = WOULD_HAVE.get(hit.outcome, hit.outcome)
        line = f"Rule {hit.rule.name} v{hit.rule_version} would have {words} this."
        if line not in out[hit.interrupt_id]:
            out[hit.interrupt_id].append(line)
    return out


@dataclass
class RuleStats:
    rule: DecisionRule
    dry_run_hits: int = 0
    live_decisions: int = 0
    skipped: int = 0
    errors: int = 0
    # Dry-run hits on interrupts a person has decided since, and how many of those agree.
    judged: int = 0
    agreed: int = 0
    last_error: str = ""
    by_group: dict[str, int] = field(default_factory=dict)

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.judged if self.judged else None

    @property
    def agreement_text(self) -> str:
        if not self.judged:
            return "no human decisions yet"
        return f"{self.agreed} of {self.judged} ({self.agreement:.0%})"


def rule_stats(*, since: datetime | None = None) -> list[RuleStats]:
    """Per rule (in precedence order): what it did on real traffic since `since`."""
    stats = {
        rule.pk: RuleStats(rule=rule) for rule in DecisionRule.objects.order_by("priority", "id")
    }
    hits = RuleHit.objects.all()
    if since is not None:
        hits = hits.filter(created_at__gte=since)
    rows = hits.values(
        "rule_id",
        "mode",
        "outcome",
        "applied",
        "skipped",
        "error",
        "interrupt__status",
        "interrupt__response_type",
        "interrupt__responded_by_id",
        "interrupt__reviewer_group__name",
    ).order_by("created_at")
    for hit in rows:
        entry = stats.get(hit["rule_id"])
        if entry is None:
            continue
        if hit["error"]:
            entry.errors += 1
            entry.last_error = hit["error"]
            continue
        if hit["mode"] == DecisionRule.Mode.LIVE:
            if hit["applied"]:
                entry.live_decisions += 1
                group = hit["interrupt__reviewer_group__name"] or "—"
                entry.by_group[group] = entry.by_group.get(group, 0) + 1
            elif hit["skipped"]:
                entry.skipped += 1
            continue
        entry.dry_run_hits += 1
        decided_by_person = (
            hit["interrupt__status"] == HumanInterrupt.Status.RESOLVED
            and hit["interrupt__responded_by_id"] is not None
        )
        if decided_by_person:
            entry.judged += 1
            entry.agreed += hit["interrupt__response_type"] == AGREES[hit["outcome"]]
    return list(stats.values())


def decision_sources(*, since: datetime) -> dict[str, Any]:
    """Automatic vs human decisions per group.

    An answer that was undone is no decision: each undo cancels the answer it took back
    (the interrupt's latest one, by the same person), so the counts add up to what stands.
    The people-time rules saved is the analytics page's (automatic decisions x the p50 of
    its time-to-decision chart): one figure for "how long people take", not two.
    """
    events = (
        AuditEvent.objects.filter(
            kind__in=[AuditEvent.Kind.INTERRUPT_ANSWERED, AuditEvent.Kind.INTERRUPT_UNDONE],
            created_at__gte=since,
        )
        .order_by("created_at", "id")
        .values_list("kind", "interrupt_id", "actor_id", "data")
    )
    standing: dict[Any, list[tuple[Any, dict[str, Any]]]] = {}
    for kind, interrupt_id, actor_id, data in events:
        answers = standing.setdefault(interrupt_id, [])
        if kind == AuditEvent.Kind.INTERRUPT_ANSWERED:
            answers.append((actor_id, data or {}))
            continue
        for i in range(len(answers) - 1, -1, -1):
            if answers[i][0] == actor_id:
                del answers[i]
                break
    per_group: dict[str, dict[str, int]] = {}
    automatic = 0
    for actor_id, data in (answer for answers in standing.values() for answer in answers):
        group = data.get("group") or "—"
        entry = per_group.setdefault(group, {"automatic": 0, "human": 0})
        if data.get("rule"):
            entry["automatic"] += 1
            automatic += 1
        elif actor_id is not None:
            entry["human"] += 1
    return {
        "groups": [{"group": name, **counts} for name, counts in sorted(per_group.items())],
        "automatic": automatic,
    }
