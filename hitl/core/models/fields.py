"""A JSONField that keeps the key order a graph wrote.

PostgreSQL's jsonb stores objects with their keys sorted (shortest first), so a tool's
arguments `{to, subject, copies, urgent}` would come back `{to, copies, urgent,
subject}` on every page and API. This field uses the `json` type on PostgreSQL, which
keeps the text as written; key lookups (`args__clarification_type`) still work, on a
jsonb cast of the column. SQLite stores JSON as text already.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.models.fields.json import KeyTransform
from psycopg.types.json import Json


class _AsJsonb(models.Func):
    """The column as jsonb on PostgreSQL (for key lookups and comparisons), as is elsewhere."""

    template = "%(expressions)s"
    output_field = models.JSONField()

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"({sql})::jsonb", params


class _KeyFactory:
    def __init__(self, key_name: str):
        self.key_name = key_name

    def __call__(self, lhs: Any, *args: Any, **kwargs: Any) -> KeyTransform:
        return KeyTransform(self.key_name, _AsJsonb(lhs), *args, **kwargs)


class OrderedJSONField(models.JSONField):
    """JSON that keeps its objects' key order (the `json` type on PostgreSQL)."""

    def db_type(self, connection):
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value, connection, prepared=False):
        if connection.vendor == "postgresql":
            if not prepared:
                value = self.get_prep_value(value)
            if value is None or hasattr(value, "as_sql"):
                return value
            # Sent as json, not jsonb: jsonb would reorder the keys on the way in.
            return Json(value, dumps=lambda obj: json.dumps(obj, cls=self.encoder))
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value, expression, connection):
        if connection.vendor == "postgresql":
            # psycopg decodes the json type itself: a str here is a JSON string, the value.
            # Decoding it again made the answer "12" the number 12 (and 5,000 digits a 500).
            return value
        return super().from_db_value(value, expression, connection)

    def get_transform(self, name):
        transform = super().get_transform(name)
        if isinstance(transform, type) or transform is None:
            return transform
        return _KeyFactory(name)
