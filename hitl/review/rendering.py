"""Turning agent-supplied text and values into safe, typed HTML building blocks.

Everything here treats its input as hostile: descriptions and messages come from
models and tools, so markdown is rendered with raw HTML disabled *and* the result
goes through an allow-list sanitizer (defence in depth: a markdown-it plugin or a
future option change must not open a hole).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from agents.coerce import json_type

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "td": {"align"}, "th": {"align"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


def sanitize_html(html: str) -> SafeString:
    """Keep only the allow-listed tags/attributes; scripts and styles lose their content too."""
    cleaned = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return mark_safe(cleaned)  # noqa: S308 - the allow-list sanitizer just ran


def markdown(text: Any) -> SafeString:
    """Render agent markdown to sanitized HTML."""
    if not text:
        return mark_safe("")
    return sanitize_html(_md.render(str(text)))


def pretty_json(value: Any) -> str:
    """Indented JSON for display (escaped by the template like any text)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


# --- typed argument fields ----------------------------------------------------------

# Widgets a field can have; "json" is the editor for lists, objects and nulls.
STRING, TEXT, INTEGER, NUMBER, BOOLEAN, CHOICE, JSON = (
    "string",
    "text",
    "integer",
    "number",
    "boolean",
    "choice",
    "json",
)


@dataclass
class ArgField:
    """One tool argument as a typed, editable field."""

    index: int
    key: str
    widget: str
    value: Any
    present: bool = True
    required: bool = False
    description: str = ""
    choices: list[Any] = field(default_factory=list)
    minimum: float | None = None
    maximum: float | None = None
    # Pinned by the schema ("const"): shown, never editable, sent back unchanged.
    locked: bool = False
    # The schema's type when the proposed value has another one (edited as JSON).
    expected: str = ""

    @property
    def name(self) -> str:
        # Keys are arbitrary strings from the agent; form field names are positional.
        return f"arg_{self.index}"

    @property
    def type_label(self) -> str:
        return {TEXT: "string", CHOICE: "choice", JSON: "json"}.get(self.widget, self.widget)

    @property
    def display(self) -> str:
        """The value as text for read-only display and input values."""
        if self.widget in (STRING, TEXT):
            if self.value is None:
                return ""
            return self.value if isinstance(self.value, str) else pretty_json(self.value)
        if self.widget == BOOLEAN:
            return "true" if self.value else "false"
        if self.widget in (INTEGER, NUMBER):
            return "" if self.value is None else json.dumps(self.value)
        if self.widget == CHOICE:
            return json.dumps(self.value) if not isinstance(self.value, str) else self.value
        return pretty_json(self.value)

    @property
    def proposed_type(self) -> str:
        return json_type(self.value)

    @property
    def choice_values(self) -> list[tuple[str, str]]:
        """(submitted value, label) for a choice field; values are JSON so types survive."""
        return [(json.dumps(c), c if isinstance(c, str) else json.dumps(c)) for c in self.choices]

    @property
    def current_choice(self) -> str:
        return json.dumps(self.value)


def schema_type(prop: dict[str, Any]) -> str | None:
    kind = prop.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is None:
        for key in ("anyOf", "oneOf"):
            options = [o for o in prop.get(key) or [] if isinstance(o, dict)]
            kinds = [o.get("type") for o in options if o.get("type") != "null"]
            if len(kinds) == 1 and isinstance(kinds[0], str):
                return kinds[0]
    return kind if isinstance(kind, str) else None


def _fits(schema_type: str | None, value: Any) -> bool:
    """Whether a proposed value has the schema's type (None fits any: an unset value)."""
    if schema_type is None or value is None:
        return True
    actual = json_type(value)
    if schema_type == "number":
        return actual in ("integer", "number")
    return actual == schema_type


def _widget_for(schema_type: str | None, value: Any, prop: dict[str, Any]) -> str:
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return CHOICE
    if not _fits(schema_type, value):
        # The agent proposed another type than its schema says: edit the value as JSON
        # so it is shown (and sent back unchanged) as what it is, never as Python text.
        return JSON
    kind = schema_type or json_type(value)
    if kind == "string":
        text = value if isinstance(value, str) else ""
        return TEXT if ("\n" in text or len(text) > 80) else STRING
    if kind in ("integer", "number", "boolean"):
        return kind
    return JSON


def arg_fields(args: dict[str, Any] | None, schema: dict[str, Any] | None) -> list[ArgField]:
    """The proposed arguments as typed fields, plus optional schema properties left out."""
    args = args if isinstance(args, dict) else {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    keys = list(args) + [k for k in props if k not in args]
    fields = []
    for index, key in enumerate(keys):
        if props.get(key) is False and key not in args:
            continue  # the schema forbids this argument
        prop = props.get(key) if isinstance(props.get(key), dict) else {}
        present = key in args
        value = args.get(key, prop.get("default"))
        locked = "const" in prop
        if locked and not present:
            continue
        kind = schema_type(prop)
        fields.append(
            ArgField(
                index=index,
                key=str(key),
                widget=_widget_for(kind, value, prop),
                value=value,
                present=present,
                required=key in required,
                description=str(prop.get("description") or ""),
                choices=list(prop.get("enum") or []),
                minimum=prop.get("minimum"),
                maximum=prop.get("maximum"),
                locked=locked,
                expected="" if _fits(kind, value) else str(kind),
            )
        )
    return fields


# --- file previews ---------------------------------------------------------------------


def csv_preview(data: bytes, *, max_rows: int = 50, max_cols: int = 20) -> dict[str, Any]:
    """The first rows of a CSV as header + rows (for an HTML table; cells are escaped later)."""
    text = data.decode("utf-8", errors="replace")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = []
    truncated = False
    for i, row in enumerate(csv.reader(io.StringIO(text), dialect)):
        if i > max_rows:
            truncated = True
            break
        rows.append(row[:max_cols])
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    return {"header": header, "rows": body, "truncated": truncated}


PEEK_ARGS = 3
PEEK_CHARS = 60
SUMMARY_KEY = "x-hitl-summary"  # a tool's args schema may name the args that matter


@dataclass
class ArgPeek:
    """The few args an inbox row shows, and the keys (or cut values) it leaves unseen."""

    shown: list[tuple[str, str]]
    unseen: list[str]


def peek_args(args: Any, schema: Any, limit: int = PEEK_ARGS) -> ArgPeek:
    """The args that matter (the schema's `x-hitl-summary` list, else the first ones) as
    short text; `unseen` names every arg the row does not show in full."""
    if not isinstance(args, dict) or not args:
        return ArgPeek([], [])
    wanted = schema.get(SUMMARY_KEY) if isinstance(schema, dict) else None
    keys = [k for k in wanted if k in args] if isinstance(wanted, list) else []
    keys = (keys or list(args))[:limit]
    shown, unseen = [], [str(k) for k in args if k not in keys]
    for key in keys:
        value = args[key]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = " ".join(text.split())
        if len(text) > PEEK_CHARS or text != (value if isinstance(value, str) else text):
            unseen.append(f"{key} (in full)")
        shown.append((str(key), text[: PEEK_CHARS - 1] + "…" if len(text) > PEEK_CHARS else text))
    return ArgPeek(shown, unseen)
