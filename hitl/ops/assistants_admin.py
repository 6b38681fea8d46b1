"""Admin for assistants (every save is a new version, through the same service as the
API) and crons (read, pause, delete)."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList

from hitl.core import errors
from hitl.core.models import Assistant, AssistantVersion, Cron, CronFire
from hitl.core.registry import registry
from hitl.core.resources.assistants import (
    AssistantFields,
    assistant_create,
    assistant_delete,
    assistant_set_latest,
    assistant_update,
    default_assistant_id,
)
from hitl.core.runs.config import check_config, run_config_merge


class AssistantForm(forms.ModelForm):
    graph = forms.ChoiceField(choices=(), help_text="The registered graph this assistant runs.")

    class Meta:
        model = Assistant
        fields = ("graph", "name", "description", "config", "context", "metadata")
        help_texts = {
            "description": "What it is for; clients get it with the assistant (assistants.get).",
            "config": (
                'A JSON object, LangGraph\'s run config: {"configurable": {...}, "tags": [...], '
                '"recursion_limit": 50, "metadata": {...}, "run_name": "..."}; other keys go '
                "into configurable. A run's own config is merged over it, key by key."
            ),
            "context": (
                "A JSON object the graph reads as its runtime context (mirrored into "
                "configurable). A run's own context is merged over it, key by key."
            ),
            "metadata": (
                "A JSON object kept with the assistant, for clients to find it by "
                "(assistants.search); the graph does not see it."
            ),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["graph"].choices = [(name, name) for name in registry.names()]

    def clean_config(self):
        try:
            return check_config(self.cleaned_data.get("config") or {})
        except errors.ServiceError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_context(self):
        value = self.cleaned_data.get("context") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError("The context must be a JSON object.")
        try:
            # The service's own check of a run's context (reserved keys, storable JSON).
            return run_config_merge(config=None, context=value)[1]
        except errors.ServiceError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_metadata(self):
        value = self.cleaned_data.get("metadata") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError("The metadata must be a JSON object.")
        return value


class VersionInline(admin.TabularInline):
    model = AssistantVersion
    extra = 0
    can_delete = False
    fields = ("version", "name", "graph", "config", "context", "metadata", "created_at")
    readonly_fields = fields
    ordering = ("-version",)

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Assistant)
class AssistantAdmin(admin.ModelAdmin):
    form = AssistantForm
    list_display = ("name", "graph", "version", "created_by", "updated_at")
    list_filter = ("graph",)
    search_fields = ("name", "description")
    readonly_fields = ("id", "version", "created_by", "created_at", "updated_at")
    inlines = [VersionInline]
    actions = ["make_previous_version_current"]

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        fields = {k: data.get(k) for k in ("config", "context", "name", "description")}
        if change:
            # A new version, as an API update makes (metadata replaced here, not merged).
            saved = assistant_update(
                user=request.user, assistant_id=str(obj.pk), graph=data["graph"], **fields
            )
            Assistant.objects.filter(pk=obj.pk).update(metadata=data.get("metadata") or {})
        else:
            saved = assistant_create(
                user=request.user,
                graph=data["graph"],
                fields=AssistantFields(metadata=data.get("metadata"), **fields),
            )
        obj.pk, obj.version = saved.row.pk, saved.version
        obj._state.adding = False

    def delete_model(self, request, obj):
        assistant_delete(user=request.user, assistant_id=str(obj.pk))

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            assistant_delete(user=request.user, assistant_id=str(obj.pk))

    @admin.action(description="Go back to the previous version", permissions=["change"])
    def make_previous_version_current(self, request, queryset):
        for obj in queryset:
            if obj.version <= 1:
                self.message_user(request, f"{obj}: already at version 1.", messages.WARNING)
                continue
            assistant_set_latest(
                user=request.user, assistant_id=str(obj.pk), version=obj.version - 1
            )


class CronFireInline(admin.TabularInline):
    model = CronFire
    extra = 0
    can_delete = False
    fields = ("scheduled_for", "run", "fired_at")
    readonly_fields = fields
    ordering = ("-scheduled_for",)

    def has_add_permission(self, request, obj=None):
        return False


def assistant_names(ids: set[str]) -> dict[str, str]:
    """What to call the assistants some crons name by id: "name (graph)"."""
    defaults = {default_assistant_id(graph): graph for graph in registry.names()}
    named = {i: f"{defaults[i]} (default assistant)" for i in ids if i in defaults}
    uuids = set()
    for value in ids - set(named):
        try:
            uuids.add(uuid.UUID(value))
        except ValueError:
            continue
    for row in Assistant.objects.filter(pk__in=uuids).only("name", "graph"):
        named[str(row.pk)] = f"{row.name} ({row.graph})"
    return named


class CronChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        # One query for the page's assistants, not one per row.
        known = assistant_names({cron.assistant_id for cron in self.result_list})
        for cron in self.result_list:
            cron.assistant_label = known.get(cron.assistant_id, cron.assistant_id)


@admin.register(Cron)
class CronAdmin(admin.ModelAdmin):
    list_display = ("schedule", "assistant", "thread", "next_run_date", "enabled")
    list_filter = ("enabled",)
    fields = (
        "id",
        "schedule",
        "assistant",
        "assistant_id",
        "thread",
        "payload",
        "metadata",
        "next_run_date",
        "end_time",
        "enabled",
        "user",
        "created_at",
    )
    readonly_fields = (
        "id",
        "schedule",
        "assistant",
        "assistant_id",
        "thread",
        "payload",
        "next_run_date",
        "user",
        "created_at",
    )
    inlines = [CronFireInline]

    def has_add_permission(self, request):
        return False  # crons are made through the API (client.crons.create)

    def get_changelist(self, request, **kwargs):
        return CronChangeList

    @admin.display(description="assistant", ordering="assistant_id")
    def assistant(self, obj: Cron) -> str:
        label = getattr(obj, "assistant_label", None)  # set for a list page's rows
        if label is None:
            label = assistant_names({obj.assistant_id}).get(obj.assistant_id, obj.assistant_id)
        return label
