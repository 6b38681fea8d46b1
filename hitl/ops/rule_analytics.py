"""The analytics page's automation section: automatic vs human decisions, rules, time saved."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hitl.core.decisions.rule_stats import decision_sources, rule_stats


def automation_context(since: datetime, human_seconds, people_p50: float) -> dict[str, Any]:
    """`people_p50`: the time-to-decision chart's p50 over all groups, the same figure the
    page shows there, so "time saved" and the chart cannot disagree."""
    sources = decision_sources(since=since)
    return {
        "groups": sources["groups"],
        "automatic": sources["automatic"],
        "saved": human_seconds(sources["automatic"] * people_p50),
        "median": human_seconds(people_p50),
        "rules": [
            {
                "label": s.rule.label,
                "mode": s.rule.get_mode_display(),
                "outcome": s.rule.outcome,
                "live": s.live_decisions,
                "by_group": ", ".join(f"{g} {n}" for g, n in sorted(s.by_group.items())),
                "dry_run": s.dry_run_hits,
                "agreement": s.agreement_text,
                "skipped": s.skipped,
                "errors": s.errors,
            }
            for s in rule_stats(since=since)
        ],
    }
