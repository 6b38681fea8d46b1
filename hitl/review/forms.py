"""Forms of the reviewer web app: filter the inbox, decide an interrupt (start: start_form)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from django import forms

from agents.tools.clarification import CLARIFICATION_TYPES
from hitl.core.errors import Invalid, check_json
from hitl.core.models import HumanInterrupt
from hitl.core.registry import registry
from hitl.review.rendering import (
    BOOLEAN,
    CHOICE,
    INTEGER,
    JSON,
    NUMBER,
    STRING,
    TEXT,
    ArgField,
    arg_fields,
)
from hitl.review.selectors import TABS, InboxQuery, interrupt_clarification


class InboxFilterForm(forms.Form):
    """The inbox's query string. For showing a page anything malformed falls back to the
    default; for deciding ("select all matching") it is a 400 naming the field."""

    tab = forms.ChoiceField(choices=[(t, t) for t in TABS], required=False)
    group = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)
    graph = forms.ChoiceField(required=False)
    clarification = forms.ChoiceField(
        choices=[("", "any type")] + [(c, c.replace("_", " ")) for c in CLARIFICATION_TYPES],
        required=False,
    )
    mine = forms.BooleanField(required=False)
    claimed = forms.ChoiceField(
        choices=[
            ("", "any claim"),
            ("mine", "claimed by me"),
            ("others", "claimed by others"),
            ("unclaimed", "unclaimed"),
        ],
        required=False,
    )
    snoozed = forms.BooleanField(required=False)
    order = forms.ChoiceField(
        choices=[("newest", "newest first"), ("oldest", "oldest first")], required=False
    )
    after = forms.CharField(required=False, max_length=200)
    before = forms.CharField(required=False, max_length=200)
    last = forms.BooleanField(required=False)

    def __init__(self, data, *, groups, default_tab: str = "pending"):
        super().__init__(data)
        self.default_tab = default_tab
        self.fields["group"].choices = [("", "all groups")] + [(g.pk, g.name) for g in groups]
        self.fields["graph"].choices = [("", "all graphs")] + [(n, n) for n in registry.names()]

    @property
    def active_count(self) -> int:
        """How many filters narrow the list (the phone's Filters button says so)."""
        data = self.data
        names = ("group", "graph", "clarification", "mine", "claimed", "snoozed")
        return sum(1 for name in names if data.get(name))

    def query(self, *, strict: bool = False) -> InboxQuery:
        """The filter as a query. With `strict`, Invalid for any field that does not
        validate: dropping it would widen what the filter matches (a group the user is
        not in would become every group)."""
        if not self.is_valid() and strict:
            name, errors = next(iter(self.errors.items()))
            raise Invalid(f"The filter's {name!r} is not valid: {' '.join(errors)}")
        data = {k: v for k, v in self.cleaned_data.items() if k not in self.errors}
        return InboxQuery(
            tab=data.get("tab") or self.default_tab,
            group=data.get("group"),
            graph=data.get("graph") or "",
            clarification=data.get("clarification") or "",
            mine=bool(data.get("mine")),
            claimed=data.get("claimed") or "",
            snoozed=bool(data.get("snoozed")),
            order=data.get("order") or "newest",
            after=data.get("after") or "",
            before=data.get("before") or "",
            last=bool(data.get("last")),
        )


class NumberField(forms.Field):
    """A JSON number: integral input stays an int, anything else a float."""

    def to_python(self, value):
        if value in (None, ""):
            return None
        try:
            number = json.loads(str(value).strip())
        except json.JSONDecodeError:
            number = None
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise forms.ValidationError("Enter a number.")
        return number


class PrettyJSONField(forms.JSONField):
    def to_python(self, value):
        # Bounded and checked like every API body: a deep or NUL-laden value is a form
        # error naming the field, not a 500 further down.
        try:
            return check_json(super().to_python(value), self.label or "The value")
        except RecursionError:
            raise forms.ValidationError(
                f"{self.label or 'The value'} is nested too deeply."
            ) from None
        except Invalid as exc:
            raise forms.ValidationError(exc.message) from None

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


def arg_form_field(arg: ArgField) -> forms.Field:
    attrs = {"data-type": arg.type_label, "data-key": arg.key, "spellcheck": "false"}
    common = {"required": False, "label": arg.key, "help_text": arg.description}
    if arg.widget == BOOLEAN:
        if arg.present:
            return forms.BooleanField(
                initial=bool(arg.value), widget=forms.CheckboxInput(attrs=attrs), **common
            )
        return forms.NullBooleanField(widget=forms.NullBooleanSelect(attrs=attrs), **common)
    if arg.widget == INTEGER:
        attrs.update({"step": "1", "inputmode": "numeric"})
        if arg.minimum is not None:
            attrs["min"] = arg.minimum
        if arg.maximum is not None:
            attrs["max"] = arg.maximum
        return forms.IntegerField(
            initial=arg.value, widget=forms.NumberInput(attrs=attrs), **common
        )
    if arg.widget == NUMBER:
        attrs["inputmode"] = "decimal"
        return NumberField(initial=arg.display, widget=forms.TextInput(attrs=attrs), **common)
    if arg.widget == CHOICE:
        choices = ([] if arg.present else [("", "—")]) + arg.choice_values
        return forms.ChoiceField(
            choices=choices,
            initial=arg.current_choice if arg.present else "",
            widget=forms.Select(attrs=attrs),
            **common,
        )
    if arg.widget == JSON:
        rows = min(12, max(3, arg.display.count("\n") + 2))
        return PrettyJSONField(
            initial=arg.value,
            widget=forms.Textarea(attrs={**attrs, "rows": rows, "class": "json-editor"}),
            **common,
        )
    if arg.widget == TEXT:
        return forms.CharField(
            initial=arg.value,
            strip=False,
            widget=forms.Textarea(attrs={**attrs, "rows": 4}),
            **common,
        )
    return forms.CharField(
        initial=arg.value, strip=False, widget=forms.TextInput(attrs=attrs), **common
    )


def _schema_message(error: jsonschema.exceptions.ValidationError) -> str:
    """A schema error in words a reviewer can act on."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.instance in ("", None) and error.validator in ("minLength", "pattern", "type"):
        return "Required: this cannot be empty."
    if error.validator == "pattern":
        hint = schema.get("description") or "It does not have the expected form."
        return f"{error.instance!r} is not valid here. {hint}"
    return str(error.message)


NOTELESS = {"accept": "accept", "edit": "submit the edit", "ignore": "ignore"}


class DecisionForm(forms.Form):
    """One decision on one interrupt; the edit fields keep each argument's JSON type."""

    type = forms.ChoiceField(
        choices=[(t, t) for t in ("accept", "edit", "response", "ignore")], required=False
    )
    choice = forms.CharField(required=False, max_length=2000)
    response = forms.CharField(
        required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, data=None, *, interrupt: HumanInterrupt):
        super().__init__(data, auto_id=f"id_{interrupt.pk.hex[:8]}_%s")
        self.interrupt = interrupt
        # Four-eyes: after an edit, the args under approval are the ones to approve or edit.
        args = interrupt.args if interrupt.approval_args is None else interrupt.approval_args
        self.arg_fields = arg_fields(args, interrupt.args_schema)
        if interrupt.allow_edit:
            for arg in self.arg_fields:
                if not arg.locked:
                    self.fields[arg.name] = arg_form_field(arg)

    @property
    def respond_label(self) -> str:
        return "Send answer" if interrupt_clarification(self.interrupt) else "Respond"

    def submitted(self) -> str:
        """What the reviewer typed (edited values and note), to hand back if it was not applied."""
        if not self.is_bound:
            return ""
        lines = []
        for arg in self.arg_fields:
            if arg.name in self.fields and arg.name in self.data:
                lines.append(f"{arg.key}: {self.data.get(arg.name)}")
        note = (self.data.get("response") or "").strip()
        if note:
            lines.append(note if not lines else f"note: {note}")
        return "\n".join(lines)

    def unsent_edit(self) -> dict[str, str]:
        """The edit fields as posted when any differs from the proposal (a typed edit that
        a decision other than edit leaves unsent), else {}."""
        if not self.is_bound:
            return {}
        names = [arg.name for arg in self.arg_fields if arg.name in self.fields]
        posted = [name for name in names if name in self.data]
        # Posted without the card's fields (the inbox's quick keys): nothing was typed.
        if not posted or not any(name in self.changed_data for name in names):
            return {}
        return {name: self.data[name] for name in posted}

    @property
    def has_editable(self) -> bool:
        """Whether any argument can be edited (an edit fieldset, not a read-only list)."""
        return any(arg.name in self.fields for arg in self.arg_fields)

    def edit_rows(self):
        """(argument, bound field or None when the argument is locked) in display order."""
        return [
            (arg, self[arg.name] if arg.name in self.fields else None) for arg in self.arg_fields
        ]

    def clean(self):
        cleaned = super().clean()
        kind = cleaned.get("type") or ""
        if cleaned.get("choice"):
            note = (cleaned.get("response") or "").strip()
            if note and note != cleaned["choice"]:
                raise forms.ValidationError(
                    "Pick an option or send your own words, not both: your note was kept."
                )
            kind = "response"
            cleaned["response"] = cleaned["choice"]
        if not kind:
            raise forms.ValidationError("Choose a decision.")
        if kind not in self.interrupt.allowed_types:
            allowed = ", ".join(self.interrupt.allowed_types) or "nothing"
            raise forms.ValidationError(
                f"This interrupt does not allow {kind} (allowed: {allowed})."
            )
        if kind == "response" and not (cleaned.get("response") or "").strip():
            self.add_error("response", "Write a response (or pick an option).")
        elif kind != "response" and (cleaned.get("response") or "").strip():
            # Only a response carries the note: refuse rather than drop what was typed.
            self.add_error(
                "response",
                f"This note is sent only with {self.respond_label}. Send it that way, "
                f"or clear it to {NOTELESS[kind]}.",
            )
        if kind != "edit":
            # Edit fields are only validated for an edit; a bad number must not block accept.
            for arg in self.arg_fields:
                self.errors.pop(arg.name, None)
        elif self.interrupt.args_schema and not any(a.name in self.errors for a in self.arg_fields):
            self._check_schema()
        cleaned["type"] = kind
        return cleaned

    def _check_schema(self) -> None:
        """Refuse an edit the tool's schema refuses, at the field, before the agent resumes."""
        try:
            validator = jsonschema.Draft202012Validator(self.interrupt.args_schema)
            errors = sorted(validator.iter_errors(self._edited_args()), key=lambda e: list(e.path))
        except (jsonschema.exceptions.SchemaError, TypeError, ValueError):
            return  # a broken schema: the service says so
        if not errors:
            return
        fields = {arg.key: arg.name for arg in self.arg_fields if arg.name in self.fields}
        where = "/".join(str(p) for p in errors[0].path) or "args"
        self.add_error(
            None,
            f"Edited args do not match the tool's schema at {where}: {_schema_message(errors[0])}",
        )
        for error in errors:
            key = error.path[0] if error.path else None
            if key in fields and fields[key] not in self.errors:
                self.add_error(fields[key], _schema_message(error))

    def decision(self) -> tuple[str, Any]:
        """(response_type, args) for services.interrupt_resolve."""
        kind = self.cleaned_data["type"]
        if kind == "response":
            return kind, self.cleaned_data["response"].replace("\r\n", "\n")
        if kind == "edit":
            return kind, {"action": self.interrupt.action, "args": self._edited_args()}
        return kind, None

    def _edited_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for arg in self.arg_fields:
            if arg.locked:
                args[arg.key] = arg.value
                continue
            value = self.cleaned_data.get(arg.name)
            if isinstance(value, str) and arg.widget in (STRING, TEXT):
                value = value.replace("\r\n", "\n")  # browsers send textarea lines as CRLF
            if arg.widget == CHOICE and value not in (None, ""):
                value = json.loads(value)
            elif arg.widget == CHOICE:
                value = None
            if not arg.present and value in (None, ""):
                continue  # an optional argument the agent left out stays out
            args[arg.key] = value
        return args
