"""Malformed request bodies every route must refuse with a 4xx (never a 5xx).

Shared by the fuzz tests of each surface: one list, so each route meets the same attacks.
Each case is (name, raw bytes); a test wraps what the route reads (JSON body, form field,
query string) around them.
"""

from __future__ import annotations

import json

DEPTH = 20_000
TEN_MB = 10 * 1024 * 1024


def deep_json(depth: int = DEPTH) -> str:
    """A JSON array nested `depth` levels."""
    return "[" * depth + "]" * depth


def json_bodies() -> list[tuple[str, bytes]]:
    """Bodies a JSON route must refuse: not JSON, wrong types, NUL, surrogates, deep, huge."""
    return [
        ("empty", b""),
        ("not json", b"{not json"),
        ("not utf-8", b'{"a": "\xff\xfe"}'),
        ("a list", b"[1, 2, 3]"),
        ("a string", b'"x"'),
        ("a number", b"12"),
        ("null", b"null"),
        ("nul in a value", json.dumps({"a": "x\u0000y"}).encode()),
        ("nul in a key", json.dumps({"a\u0000": 1}).encode()),
        ("lone surrogate", b'{"a": "\\ud800"}'),
        ("surrogate key", b'{"\\udfff": 1}'),
        ("deep nesting", deep_json().encode()),
        ("deep object", ('{"a":' * DEPTH + "1" + "}" * DEPTH).encode()),
        ("ten megabytes", b'{"a": "' + b"x" * TEN_MB + b'"}'),
        ("huge number", b'{"a": 1' + b"0" * 5000 + b"}"),
    ]


def text_values() -> list[tuple[str, str]]:
    """Values for a single field (form field, header, query parameter)."""
    return [
        ("nul", "a\u0000b"),
        ("lone surrogate", "a\ud800b"),
        ("very long", "x" * 100_000),
        ("non-ascii digits", "\u00b2\u00b3"),
        ("path traversal", "../../etc/passwd"),
    ]
