"""Admin for notifications: every message with its attempts, group channels, preferences."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils.html import format_html_join

from hitl.core.models import (
    GroupNotificationSettings,
    Notification,
    NotificationPreference,
)
from hitl.core.net.webhook_urls import WebhookNotAllowed, webhook_check_url
from hitl.ops.secret_fields import (
    KEEP_HELP,
    SecretsAdmin,
    WriteOnlySecretsForm,
    masked_url,
    secret_input,
)


def clean_slack_url(url: str) -> str:
    """A Slack URL must pass the run-webhook guard (allow-listed host and port)."""
    if not url:
        return url
    try:
        return webhook_check_url(url)
    except WebhookNotAllowed as exc:
        raise ValidationError(f"{exc} Add the host to HITL_WEBHOOK_HOSTS.") from None


class SlackWebhookForm(WriteOnlySecretsForm):
    """A form whose model keeps a Slack incoming-webhook URL: write-only."""

    slack_webhook_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        widget=secret_input(),
        label="Slack webhook URL",
        help_text="A Slack-compatible incoming webhook URL. " + KEEP_HELP,
    )
    clear_slack_webhook_url = forms.BooleanField(
        required=False, label="Clear Slack webhook URL", help_text="Remove the stored URL."
    )
    secret_fields = ("slack_webhook_url",)


class GroupNotificationSettingsForm(SlackWebhookForm):
    class Meta:
        model = GroupNotificationSettings
        fields = (
            "group",
            "email_members",
            "email_addresses",
            "slack_webhook_url",
            "clear_slack_webhook_url",
            "digest_minutes",
        )
        labels = {
            "email_members": "E-mail the members",
            "email_addresses": "Other e-mail addresses",
            "digest_minutes": "Digest (minutes)",
        }
        help_texts = {
            "email_members": (
                "E-mail each member about new pending items. A member's own notification "
                "preferences, when they have any, decide for them."
            ),
            "email_addresses": (
                "Addresses to mail as well (a team list): one per line, or separated by "
                "commas. They get the item and a link to it, no one-click decisions."
            ),
            "digest_minutes": (
                "0: a message as items arrive (those of a few seconds share one). N: at most "
                "one message per N minutes to the addresses and Slack channel above, "
                "listing everything that arrived meanwhile."
            ),
        }

    def clean_slack_webhook_url(self):
        return clean_slack_url(self.cleaned_data["slack_webhook_url"])

    def clean_email_addresses(self):
        value = self.cleaned_data["email_addresses"]
        for address in value.replace(",", "\n").splitlines():
            if address.strip():
                validate_email(address.strip())
        return value


@admin.register(GroupNotificationSettings)
class GroupNotificationSettingsAdmin(SecretsAdmin):
    form = GroupNotificationSettingsForm
    secret_fields = ("slack_webhook_url",)
    list_display = ("group", "email_members", "secret_stored", "digest_minutes")


class NotificationPreferenceForm(SlackWebhookForm):
    class Meta:
        model = NotificationPreference
        fields = (
            "user",
            "email",
            "slack_webhook_url",
            "clear_slack_webhook_url",
            "digest_minutes",
            "quiet_start",
            "quiet_end",
            "timezone",
            "all_groups",
        )
        labels = {"digest_minutes": "Digest (minutes)", "email": "E-mail"}
        help_texts = {
            "digest_minutes": (
                "0: a message as items arrive (those of a few seconds share one). N: at most "
                "one message per N minutes, listing everything that arrived meanwhile."
            ),
            "quiet_start": (
                "Quiet hours, in the time zone below (set both, or neither): what falls due "
                "in them is sent when they end. 22:00 to 07:00 spans midnight."
            ),
            "timezone": "An IANA time zone name, e.g. Europe/Berlin.",
        }

    def clean_slack_webhook_url(self):
        return clean_slack_url(self.cleaned_data["slack_webhook_url"])


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(SecretsAdmin):
    form = NotificationPreferenceForm
    secret_fields = ("slack_webhook_url",)
    list_display = ("user", "email", "digest_minutes", "quiet_start", "quiet_end", "timezone")
    search_fields = ("user__username",)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("subject", "channel", "destination", "kind", "status", "attempts", "created_at")
    list_filter = ("status", "channel", "kind")
    search_fields = ("subject",)
    show_full_result_count = False
    # A Slack message's address is its webhook URL, a secret: shown as `destination`.
    readonly_fields = [
        f.name for f in Notification._meta.fields if f.name not in ("attempt_log", "address")
    ] + ["destination", "attempts_table"]
    exclude = ("attempt_log", "address")

    @admin.display(description="address")
    def destination(self, obj) -> str:
        if obj.channel == Notification.Channel.SLACK:
            return masked_url(obj.address)
        return obj.address

    def get_search_results(self, request, queryset, search_term):
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if search_term:
            # E-mail addresses are searchable; webhook URLs are not (a search is an oracle).
            found |= queryset.filter(
                channel=Notification.Channel.EMAIL, address__icontains=search_term
            )
        return found, duplicates

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
