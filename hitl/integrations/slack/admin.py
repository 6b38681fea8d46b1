"""Admin for Slack approvals: who a Slack member acts as."""

from __future__ import annotations

from django.contrib import admin

from hitl.core.models import SlackUserLink


@admin.register(SlackUserLink)
class SlackUserLinkAdmin(admin.ModelAdmin):
    """Who a Slack member acts as when they press Approve / Ignore / Respond."""

    list_display = ("slack_user_id", "team_id", "user", "created_at")
    search_fields = ("slack_user_id", "user__username", "user__email")
    autocomplete_fields = ("user",)
