"""What a message outside the browser may show of an item: its action and a short, masked
summary of its args (never the graph's state). Shared by notifications and the pages a
link opens without a login, so both mask the same way."""

from __future__ import annotations

import json
import re
from typing import Any

from hitl.core.models import HumanInterrupt

SECRET_NAME = re.compile(
    r"pass|secret|token|api[_-]?key|apikey|auth|credential|cookie|session|private", re.I
)
MAX_ARGS = 4
MAX_VALUE = 80


def short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def args_summary(args: Any) -> list[tuple[str, str]]:
    """Up to MAX_ARGS (name, short value) pairs; credentials masked."""
    if not isinstance(args, dict):
        return [("value", short(args))] if args not in (None, "", {}) else []
    pairs = []
    for name, value in list(args.items())[:MAX_ARGS]:
        shown = "[hidden]" if SECRET_NAME.search(str(name)) else short(value)
        pairs.append((short(str(name)), shown))
    if len(args) > MAX_ARGS:
        pairs.append(("…", f"{len(args) - MAX_ARGS} more"))
    return pairs


def args_changes(before: Any, after: Any) -> list[tuple[str, str, str]]:
    """(name, old, new) for each argument an edit changed, credentials masked; a value
    added or taken out reads "(none)" on its missing side."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [] if before == after else [("value", short(before), short(after))]
    changes = []
    for name in list(before) + [key for key in after if key not in before]:
        if before.get(name) == after.get(name) and (name in before) == (name in after):
            continue
        if SECRET_NAME.search(str(name)):
            changes.append((short(str(name)), "[hidden]", "[hidden]"))
            continue
        old = short(before[name]) if name in before else "(none)"
        new = short(after[name]) if name in after else "(none)"
        changes.append((short(str(name)), old, new))
    return changes


def item_summary(row: HumanInterrupt) -> list[tuple[str, str]]:
    """The summary of a row's args (or of its raw value when it proposes no action)."""
    return args_summary(row.args if row.action else row.raw_value)


def action_label(row: HumanInterrupt) -> str:
    action = row.action or (row.description.splitlines()[0] if row.description else "") or row.kind
    return short(action)
