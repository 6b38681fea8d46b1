"""Pages for notifications: the signed deep link a message carries, and my preferences."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from hitl.core.access.links import LinkExpired, LinkInvalid, link_interrupt_id
from hitl.core.access.permissions import user_can_review_all
from hitl.core.models import HumanInterrupt, NotificationPreference, SlackUserLink
from hitl.core.net.webhook_urls import WebhookNotAllowed, webhook_check_url


@login_required
@require_GET
def notification_open(request, token: str):
    """Follow a message's link: after login, to the item on its thread page (which checks
    that this user may see it). Expired links say so; altered ones are a 404."""
    try:
        interrupt_id = link_interrupt_id(token)
    except LinkExpired:
        return render(request, "hitl/notifications/expired.html", status=410)
    except LinkInvalid:
        raise Http404("No such link.") from None
    thread_id = (
        HumanInterrupt.objects.filter(pk=interrupt_id).values_list("thread_id", flat=True).first()
    )
    if thread_id is None:
        raise Http404("No such item.")
    return redirect(reverse("thread", args=[thread_id]) + f"#interrupt-{interrupt_id}")


class PreferenceForm(forms.ModelForm):
    slack_webhook_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        label="Slack webhook URL",
        help_text="A Slack-compatible incoming webhook URL. Write-only: leave blank to keep "
        "the stored one.",
        # The URL lets anyone post to the channel: never sent back, not even to its owner.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_slack_webhook_url = forms.BooleanField(
        required=False, label="Remove my Slack webhook URL"
    )

    class Meta:
        model = NotificationPreference
        fields = (
            "email",
            "slack_webhook_url",
            "clear_slack_webhook_url",
            "digest_minutes",
            "quiet_start",
            "quiet_end",
            "timezone",
            "all_groups",
        )
        widgets = {
            "quiet_start": forms.TimeInput(attrs={"type": "time"}),
            "quiet_end": forms.TimeInput(attrs={"type": "time"}),
        }
        labels = {
            "email": "E-mail me",
            "slack_webhook_url": "Slack webhook URL",
            "all_groups": "Notify me of items in every group",
        }

    def clean_slack_webhook_url(self):
        url = self.cleaned_data["slack_webhook_url"]
        if url:
            try:
                webhook_check_url(url)
            except WebhookNotAllowed as exc:
                raise forms.ValidationError(str(exc)) from None
        return url

    def clean_digest_minutes(self):
        value = self.cleaned_data["digest_minutes"]
        if value > 24 * 60:
            raise forms.ValidationError("At most one day (1440 minutes).")
        return value

    def clean(self):
        data = super().clean()
        if (data.get("quiet_start") is None) != (data.get("quiet_end") is None):
            raise forms.ValidationError("Quiet hours need both a start and an end.")
        # Write-only, as in admin (hitl/ops/secret_fields.py): blank keeps, the box clears.
        if data.get("clear_slack_webhook_url"):
            data["slack_webhook_url"] = ""
        elif not data.get("slack_webhook_url") and self.instance.pk:
            stored = NotificationPreference.objects.get(pk=self.instance.pk)
            data["slack_webhook_url"] = stored.slack_webhook_url
        return data


@login_required
@require_http_methods(["GET", "POST"])
def notification_preferences(request):
    pref = NotificationPreference.objects.filter(user=request.user).first()
    pref = pref or NotificationPreference(user=request.user)
    form = PreferenceForm(request.POST or None, instance=pref)
    if not user_can_review_all(request.user):
        del form.fields["all_groups"]  # only reviewers of every group may ask for all of it
    status = 200
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Notification preferences saved.")
            return redirect("notify-preferences")
        status = 400
    context = {
        "form": form,
        "address": request.user.email,
        "slack_ids": list(
            SlackUserLink.objects.filter(user=request.user).values_list("slack_user_id", flat=True)
        ),
    }
    return render(request, "hitl/notifications/preferences.html", context, status=status)
