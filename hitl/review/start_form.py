"""The "New thread" form: one field per key of the graph's input schema, or raw JSON.

Strings, numbers, booleans, enums and lists of strings get their own inputs, a message
list (`messages`) a message box, anything else a JSON editor for that key. The server
checks the whole input against the schema (core) before anything is created; errors are
shown at the field they concern.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings

from agents.schema import is_messages
from hitl.core.errors import Invalid, check_json, load_json
from hitl.core.registry import registry
from hitl.core.runs.inputs import graph_description, graph_input_schema, input_errors
from hitl.review.forms import PrettyJSONField, arg_form_field
from hitl.review.rendering import (
    BOOLEAN,
    CHOICE,
    INTEGER,
    JSON,
    NUMBER,
    STRING,
    TEXT,
    ArgField,
    markdown,
    schema_type,
)

# Widgets only a start form has: a message box, and one string per line.
MESSAGE, LINES = "message", "lines"
FORM, RAW = "form", "json"
MAX_INPUT_BYTES = 256 * 1024


@dataclass
class InputField(ArgField):
    """One key of the graph's input, with the schema's title as its label."""

    label: str = ""


def _resolve(prop: Any, defs: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """A property with local `$ref`s followed and `X | None` unwrapped to X."""
    if not isinstance(prop, dict) or depth > 8:
        return {}
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = _resolve(defs.get(ref[len("#/$defs/") :]), defs, depth + 1)
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if not isinstance(options, list):
            continue
        real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(real) == 1 and len(real) < len(options):
            inner = _resolve(real[0], defs, depth + 1)
            prop = {**inner, **{k: v for k, v in prop.items() if k != key}}
    return prop


def _widget(key: str, prop: dict[str, Any]) -> str:
    if is_messages(prop):
        return MESSAGE
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return CHOICE
    kind = schema_type(prop)
    if kind == "string":
        return TEXT if (prop.get("maxLength") or 0) > 200 else STRING
    if kind in (INTEGER, NUMBER, BOOLEAN):
        return kind
    if kind == "array":
        items = prop.get("items")
        if isinstance(items, dict) and items.get("type") == "string" and "enum" not in items:
            return LINES
    return JSON


def input_fields(schema: dict[str, Any] | None) -> list[InputField]:
    """The schema's top-level keys as typed fields, in the schema's order."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    defs = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    required = set(schema.get("required") or [])
    fields = []
    for index, (key, raw) in enumerate(props.items()):
        prop = _resolve(raw, defs)
        widget = _widget(str(key), prop)
        has_default = "default" in prop
        fields.append(
            InputField(
                index=index,
                key=str(key),
                widget=widget,
                value=prop.get("default"),
                # A boolean that must be given is a checkbox (unticked is false); an
                # optional one, or an enum without a default, starts unset.
                present=has_default or (widget == BOOLEAN and key in required),
                required=key in required,
                description=str(prop.get("description") or ""),
                choices=list(prop.get("enum") or []),
                minimum=prop.get("minimum"),
                maximum=prop.get("maximum"),
                label=str(prop.get("title") or str(key).replace("_", " ").capitalize()),
            )
        )
    return fields


class StartJSONField(PrettyJSONField):
    """A JSON value for one key; empty (not `null`) until something is typed."""

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)


def _form_field(arg: InputField) -> forms.Field:
    attrs = {"data-key": arg.key, "data-type": arg.widget}
    if arg.widget == MESSAGE:
        field: forms.Field = forms.CharField(
            max_length=100_000,
            widget=forms.Textarea(attrs={**attrs, "rows": 5}),
            help_text=arg.description or "Your message to the agent.",
        )
    elif arg.widget == LINES:
        initial = "\n".join(str(v) for v in arg.value) if isinstance(arg.value, list) else ""
        field = forms.CharField(
            initial=initial,
            widget=forms.Textarea(attrs={**attrs, "rows": 3, "spellcheck": "false"}),
            help_text=arg.description or "One per line.",
        )
    elif arg.widget == JSON:
        field = StartJSONField(
            initial=arg.value,
            widget=forms.Textarea(
                attrs={**attrs, "rows": 3, "spellcheck": "false", "class": "json-editor"}
            ),
            help_text=arg.description or "Any JSON value.",
        )
    else:
        field = arg_form_field(arg)
    field.required = False  # "required" is the schema's to say, in words, below
    field.label = arg.label
    return field


class StartThreadForm(forms.Form):
    graph = forms.ChoiceField(choices=())
    title = forms.CharField(max_length=200, required=False)
    mode = forms.ChoiceField(
        choices=[(FORM, "Form"), (RAW, "Advanced (JSON)")],
        required=False,
        widget=forms.RadioSelect,
    )
    input = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "json-editor"}),
        required=False,
        initial="{}",
        help_text="A JSON object handed to the graph.",
    )

    def __init__(self, data=None, *, graph: str | None = None):
        super().__init__(data)
        self.fields["graph"].choices = [(name, name) for name in registry.names()]
        chosen = (data.get("graph") if data is not None else None) or graph
        if chosen not in registry.targets:
            chosen = settings.HITL_DEFAULT_GRAPH
        if chosen not in registry.targets:
            chosen = next(iter(registry.names()), None)
        self.fields["graph"].initial = chosen
        self.graph_name = chosen
        self.schema, self.note = graph_input_schema(chosen) if chosen else (None, "")
        self.description = graph_description(chosen) if chosen else ""
        # A docstring is Markdown (`create_agent`, **bold**), rendered as the cards' is.
        self.description_html = markdown(self.description)
        self.input_fields = input_fields(self.schema)
        for arg in self.input_fields:
            self.fields[arg.name] = _form_field(arg)
        if data is not None and data.get("mode"):
            mode = data.get("mode")
        elif data is not None and "input" in data:
            mode = RAW  # a client that posts only the JSON object, as before the form
        else:
            mode = FORM
        self.input_mode = (mode if mode in (FORM, RAW) else FORM) if self.input_fields else RAW
        self.fields["mode"].initial = self.input_mode
        if data is not None:
            # The choice of graph decides the fields: check only the graph's own.
            self.data = data.copy()
            self.data["mode"] = self.input_mode

    @property
    def messages_field(self):
        return next((self[a.name] for a in self.input_fields if a.widget == MESSAGE), None)

    def field_rows(self) -> list[tuple[InputField, forms.BoundField]]:
        """(field, bound field) of every input field but the message box."""
        return [(a, self[a.name]) for a in self.input_fields if a.widget != MESSAGE]

    def clean_input(self):
        if self.input_mode != RAW:
            return None
        raw = self.cleaned_data["input"].strip() or "{}"
        if len(raw.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
            raise forms.ValidationError("Input is too large (256 KiB at most).")
        try:
            value = load_json(raw, "Input")
        except Invalid as exc:
            raise forms.ValidationError(exc.message) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Input must be a JSON object.")
        return value

    def clean(self):
        cleaned = super().clean()
        if self.input_mode == RAW:
            for arg in self.input_fields:  # the hidden form's fields are not sent on
                self.errors.pop(arg.name, None)
            if "input" in self.errors:
                return cleaned
            problems = input_errors(self.schema, cleaned.get("input"))
            for key, message in problems:
                self.add_error("input", f"{key}: {message}" if key else message)
            return cleaned
        value = self._built_input(cleaned)
        fields = {arg.key: arg.name for arg in self.input_fields}
        for key, message in input_errors(self.schema, value):
            name = fields.get(key or "")
            if name and name not in self.errors:
                self.add_error(name, message)
            elif not name:
                self.add_error(None, message)
        cleaned["input"] = value
        return cleaned

    def _built_input(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        """The input object from the fields; a field left empty is left out."""
        value: dict[str, Any] = {}
        for arg in self.input_fields:
            if arg.name in self.errors:
                continue
            item = self._field_value(arg, cleaned.get(arg.name))
            if item is None:
                continue
            try:
                value[arg.key] = check_json(item, arg.label)
            except Invalid as exc:
                self.add_error(arg.name, exc.message)
        return value

    @staticmethod
    def _field_value(arg: InputField, raw: Any) -> Any:
        if isinstance(raw, str):
            raw = raw.replace("\r\n", "\n")
        if arg.widget == MESSAGE:
            text = (raw or "").strip()
            return [{"role": "user", "content": text}] if text else None
        if arg.widget == LINES:
            lines = [line.strip() for line in (raw or "").split("\n") if line.strip()]
            return lines if lines or arg.required else None
        if arg.widget in (STRING, TEXT):
            return raw if raw and raw.strip() else None
        if arg.widget == CHOICE:
            return json.loads(raw) if raw else None
        return raw  # numbers, booleans (None: unset), JSON (None: empty)

    def start_input(self) -> dict[str, Any]:
        return self.cleaned_data["input"]
