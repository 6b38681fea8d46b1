"""Admin for notifications: every message with its attempts, group channels, preferences."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils.html import format_html_join

from hitl.core.models import GroupNotificationSettings, Notification, NotificationPreference
from hitl.core.runs.webhook_urls import WebhookNotAllowed, webhook_check_url


def clean_slack_url(url: str) -> str:
    """A Slack URL must pass the run-webhook guard (allow-listed host and port)."""
    if not url:
        return url
    try:
        return webhook_check_url(url)
    except WebhookNotAllowed as exc:
        raise ValidationError(f"{exc} Add the host to HITL_WEBHOOK_HOSTS.") from None


class GroupNotificationSettingsForm(forms.ModelForm):
    slack_webhook_url = forms.URLField(required=False, max_length=500, assume_scheme="https")

    class Meta:
        model = GroupNotificationSettings
        fields = (
            "group",
            "email_members",
            "email_addresses",
            "slack_webhook_url",
            "digest_minutes",
        )

    def clean_slack_webhook_url(self):
        return clean_slack_url(self.cleaned_data["slack_webhook_url"])

    def clean_email_addresses(self):
        value = self.cleaned_data["email_addresses"]
        for address in value.replace(",", "\n").splitlines():
            if address.strip():
                validate_email(address.strip())
        return value


@admin.register(GroupNotificationSettings)
class GroupNotificationSettingsAdmin(admin.ModelAdmin):
    form = GroupNotificationSettingsForm
    list_display = ("group", "email_members", "slack_webhook_url", "digest_minutes")


class NotificationPreferenceForm(forms.ModelForm):
    slack_webhook_url = forms.URLField(required=False, max_length=500, assume_scheme="https")

    class Meta:
        model = NotificationPreference
        fields = (
            "user",
            "email",
            "slack_webhook_url",
            "digest_minutes",
            "quiet_start",
            "quiet_end",
            "timezone",
            "all_groups",
        )

    def clean_slack_webhook_url(self):
        return clean_slack_url(self.cleaned_data["slack_webhook_url"])


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    form = NotificationPreferenceForm
    list_display = ("user", "email", "digest_minutes", "quiet_start", "quiet_end", "timezone")
    search_fields = ("user__username",)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("subject", "channel", "address", "kind", "status", "attempts", "created_at")
    list_filter = ("status", "channel", "kind")
    search_fields = ("address", "subject")
    show_full_result_count = False
    readonly_fields = [f.name for f in Notification._meta.fields if f.name != "attempt_log"] + [
        "attempts_table"
    ]
    exclude = ("attempt_log",)

    @admin.display(description="attempts")
    def attempts_table(self, obj):
        rows = obj.attempt_log or []
        if not rows:
            return "none yet"
        return format_html_join(
            "\n",
            "<div>{} — {} {}</div>",
            (
                (row.get("at"), "ok" if row.get("ok") else "failed", row.get("error", ""))
                for row in rows
            ),
        )

    def has_add_permission(self, request):
        return False
