"""Admin of remote deployments: register one, see whether it answers; the key is write-only."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from hitl.core.models import RemoteDeployment
from hitl.core.net.webhook_urls import DEPLOYMENTS, WebhookNotAllowed, webhook_check_url
from hitl.core.remote.mirror import deployment_poll
from hitl.ops.secret_fields import KEEP_HELP, SecretsAdmin, WriteOnlySecretsForm, secret_input


class RemoteDeploymentForm(WriteOnlySecretsForm):
    base_url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="Base URL",
        help_text="The root of its LangGraph API.",
    )
    # Never rendered back: a blank field keeps the stored key.
    api_key = forms.CharField(
        required=False,
        widget=secret_input(),
        label="API key",
        help_text="Sent as x-api-key. " + KEEP_HELP,
    )
    clear_api_key = forms.BooleanField(
        required=False, label="Clear API key", help_text="Remove the stored key."
    )
    secret_fields = ("api_key",)

    class Meta:
        model = RemoteDeployment
        fields = ["name", "base_url", "api_key", "graphs", "reviewer_group", "enabled"]

    def clean_base_url(self):
        url = self.cleaned_data.get("base_url")
        try:
            # The webhook rules (one function): an allow-list, no private addresses.
            return webhook_check_url(url, DEPLOYMENTS)
        except WebhookNotAllowed as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_graphs(self):
        graphs = self.cleaned_data.get("graphs") or []
        if not isinstance(graphs, list) or not all(isinstance(g, str) and g for g in graphs):
            raise forms.ValidationError('A JSON list of assistant or graph ids, e.g. ["agent"].')
        return graphs

    def save(self, commit=True):
        deployment = super().save(commit=False)
        if {"base_url", "graphs"} & set(self.changed_data):
            # Another server or more graphs: look at every interrupted thread again.
            deployment.cursor = None
        if commit:
            deployment.save()
        return deployment


@admin.register(RemoteDeployment)
class RemoteDeploymentAdmin(SecretsAdmin):
    form = RemoteDeploymentForm
    secret_fields = ("api_key",)
    list_display = ["name", "url", "watching", "reviewer_group", "enabled", "health"]
    list_filter = ["enabled"]
    search_fields = ["name", "base_url"]
    readonly_fields = ["key_stored", "from_settings", "health", "last_ok_at", "last_polled_at"]
    fields = [
        "name",
        "base_url",
        "api_key",
        "key_stored",
        "clear_api_key",
        "graphs",
        "reviewer_group",
        "enabled",
        "from_settings",
        "health",
        "last_ok_at",
        "last_polled_at",
    ]
    actions = ["poll_now"]

    @admin.display(description="Base URL", ordering="base_url")
    def url(self, obj: RemoteDeployment) -> str:
        return obj.base_url

    @admin.display(description="watches")
    def watching(self, obj: RemoteDeployment) -> str:
        return ", ".join(obj.graphs) or "all graphs"

    @admin.display(description="key")
    def key_stored(self, obj: RemoteDeployment) -> str:
        return "stored (hidden)" if obj.api_key else "none"

    @admin.display(description="health")
    def health(self, obj: RemoteDeployment) -> str:
        if not obj.enabled:
            return "disabled"
        if obj.last_error:
            return format_html('<span class="remote-fault">failing: {}</span>', obj.last_error)
        if obj.last_ok_at is None:
            return "not polled yet"
        return "ok"

    @admin.action(description="Poll the selected deployments now")
    def poll_now(self, request, queryset):
        for deployment in queryset:
            found = deployment_poll(deployment)
            if found["failed"]:
                self.message_user(
                    request, f"{deployment.name}: {deployment.last_error}", messages.ERROR
                )
            else:
                self.message_user(
                    request, f"{deployment.name}: {found['made']} new item(s)", messages.SUCCESS
                )
