"""JSON containment (`@>` on PostgreSQL) as a filter, the same on SQLite.

Client-chosen metadata filters go through here: their keys are data, matched literally,
never read as ORM lookups (`a__regex` is a key named "a__regex"). PostgreSQL compares
with jsonb's `@>`; SQLite asks `hitl_json_contains`, a function this module registers on
every connection that follows jsonb's rules: an object contains another when each of
the other's keys is there with a contained value, an array when each of the other's
elements is contained in one of its own, a scalar only its equal.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import BooleanField, Expression, F, JSONField, Value

SQLITE_FUNCTION = "hitl_json_contains"


def _contains(have: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(
            key in have and _contains(have[key], value) for key, value in want.items()
        )
    if isinstance(want, list):
        if not isinstance(have, list):
            return False
        return all(any(_contains(item, wanted) for item in have) for wanted in want)
    if isinstance(have, dict | list):
        return False
    if isinstance(have, bool) or isinstance(want, bool):  # jsonb: true is not 1
        return type(have) is type(want) and have == want
    if isinstance(have, int | float) and isinstance(want, int | float):
        return have == want  # jsonb: 1 equals 1.0
    return type(have) is type(want) and have == want


def _sqlite_contains(have: str | None, want: str | None) -> int:
    if have is None or want is None:
        return 0
    try:
        return int(_contains(json.loads(have), json.loads(want)))
    except (ValueError, RecursionError):
        return 0


def install_sqlite_function(sender, connection, **kwargs) -> None:
    """connection_created receiver: give SQLite the containment test."""
    if connection.vendor != "sqlite":
        return
    connection.connection.create_function(SQLITE_FUNCTION, 2, _sqlite_contains, deterministic=True)


class JSONContains(Expression):
    """`field @> value` as a boolean filter: `qs.filter(JSONContains("metadata", {...}))`."""

    output_field = BooleanField()
    conditional = True

    def __init__(self, field: str, value: dict[str, Any]):
        super().__init__()
        self.lhs = F(field)
        self.rhs = Value(value, output_field=JSONField())

    def get_source_expressions(self):
        return [self.lhs, self.rhs]

    def set_source_expressions(self, exprs):
        self.lhs, self.rhs = exprs

    def resolve_expression(self, *args, **kwargs):
        clone = self.copy()
        clone.lhs = self.lhs.resolve_expression(*args, **kwargs)
        clone.rhs = self.rhs.resolve_expression(*args, **kwargs)
        return clone

    def as_sql(self, compiler, connection):
        lhs, lhs_params = compiler.compile(self.lhs)
        rhs, rhs_params = compiler.compile(self.rhs)
        return f"{lhs} @> {rhs}", (*lhs_params, *rhs_params)

    def as_sqlite(self, compiler, connection):
        lhs, lhs_params = compiler.compile(self.lhs)
        rhs, rhs_params = compiler.compile(self.rhs)
        return f"{SQLITE_FUNCTION}({lhs}, {rhs})", (*lhs_params, *rhs_params)
