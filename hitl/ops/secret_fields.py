"""Write-only secrets in admin: a form may set, replace or clear one, no page shows it back.

A secret is a value that grants something by itself: a deployment's API key, a Slack
incoming-webhook URL. The view-only change page would print every field's value, so a
secret field is left out of it, and the edit form's input never carries the stored value.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django import forms
from django.contrib import admin

KEEP_HELP = "Write-only: leave blank to keep the stored value."


def masked_url(url: str) -> str:
    """Where a secret URL points (scheme and host), never its path or query."""
    if not url:
        return ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}/…" if parts.scheme else "…"


def secret_input() -> forms.PasswordInput:
    return forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})


class WriteOnlySecretsForm(forms.ModelForm):
    """Blank keeps the stored secret; `clear_<name>` removes it. Subclasses list
    `secret_fields` and declare each with `secret_input()` and a `clear_<name>` box."""

    secret_fields: tuple[str, ...] = ()

    def clean(self):
        cleaned = super().clean()
        stored = type(self.instance).objects.filter(pk=self.instance.pk).first()
        for name in self.secret_fields:
            if cleaned.get(f"clear_{name}"):
                cleaned[name] = ""
            elif not cleaned.get(name) and stored is not None:
                cleaned[name] = getattr(stored, name)
            if name in cleaned:
                setattr(self.instance, name, cleaned[name])
        return cleaned


class SecretsAdmin(admin.ModelAdmin):
    """Leaves `secret_fields` out of every page that would print them (view-only change
    page); the edit form shows them as empty password inputs."""

    secret_fields: tuple[str, ...] = ()

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        if not self.has_change_permission(request, obj):
            hidden = set(self.secret_fields) | {f"clear_{name}" for name in self.secret_fields}
            fields = [name for name in fields if name not in hidden]
        return fields

    @admin.display(description="secret")
    def secret_stored(self, obj) -> str:
        return ", ".join(
            f"{name}: {'stored (hidden)' if getattr(obj, name) else 'none'}"
            for name in self.secret_fields
        )
