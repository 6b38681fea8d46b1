"""Django admin for admins: browse everything, change state only through services."""

from __future__ import annotations

import uuid
from datetime import timedelta
from functools import partial

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Group
from django.db import transaction
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils import timezone

from hitl.core import errors, runs
from hitl.core.audit import audit_entry, audit_for_thread
from hitl.core.live import listeners
from hitl.core.models import (
    ApiToken,
    Artifact,
    AuditEvent,
    HumanInterrupt,
    ReviewerGroupPolicy,
    Run,
    SsoIdentity,
    Thread,
    ToolExecution,
    WebhookDelivery,
)
from hitl.core.registry import registry
from hitl.ops import services as ops_services
from hitl.ops.secret_fields import masked_url

AUDIT_TRAIL_LIMIT = 200


def age_filter(field: str, title: str = "age") -> type[admin.SimpleListFilter]:
    """A list filter on how long ago `field` was: last hour / day / week / older."""
    windows = {
        "1h": ("last hour", timedelta(hours=1)),
        "24h": ("last 24 hours", timedelta(days=1)),
        "7d": ("last 7 days", timedelta(days=7)),
        "30d": ("last 30 days", timedelta(days=30)),
    }

    class AgeFilter(admin.SimpleListFilter):
        parameter_name = f"{field}_age"

        def lookups(self, request, model_admin):
            return [(key, label) for key, (label, _) in windows.items()] + [
                ("older", "older than 30 days")
            ]

        def queryset(self, request, queryset):
            value = self.value()
            now = timezone.now()
            if value in windows:
                return queryset.filter(**{f"{field}__gte": now - windows[value][1]})
            if value == "older":
                return queryset.filter(**{f"{field}__lt": now - windows["30d"][1]})
            return queryset

    AgeFilter.title = title
    return AgeFilter


def graph_filter(field: str) -> type[admin.SimpleListFilter]:
    """Filter by graph name; choices come from the registry, not a DISTINCT over the table."""

    class GraphFilter(admin.SimpleListFilter):
        title = "graph"
        parameter_name = "graph"

        def lookups(self, request, model_admin):
            return [(name, name) for name in registry.names()]

        def queryset(self, request, queryset):
            if self.value():
                return queryset.filter(**{field: self.value()})
            return queryset

    return GraphFilter


class UuidSearchMixin:
    """A search term that is a UUID matches ids exactly (an index lookup, not a scan)."""

    uuid_search_fields: tuple[str, ...] = ("pk",)

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        try:
            value = uuid.UUID(term)
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        matches = queryset.none()
        for field in self.uuid_search_fields:
            matches = matches | queryset.filter(**{field: value})
        return matches, False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class RunInline(ReadOnlyInline):
    model = Run
    fields = ("kind", "status", "attempts", "lease_owner", "created_at", "finished_at")
    readonly_fields = fields
    ordering = ("-created_at",)


class InterruptInline(ReadOnlyInline):
    model = HumanInterrupt
    fields = ("action", "status", "reviewer_group", "response_type", "responded_by", "expires_at")
    readonly_fields = fields
    ordering = ("-created_at",)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("reviewer_group", "responded_by")


class ArtifactInline(ReadOnlyInline):
    model = Artifact
    fields = ("path", "size", "mime", "created_at")
    readonly_fields = fields


def _audit_html(entries) -> str:
    return render_to_string("hitl/_audit.html", {"audit": entries})


@admin.register(Thread)
class ThreadAdmin(UuidSearchMixin, admin.ModelAdmin):
    list_display = ("title", "graph", "status", "requester", "reviewer_group", "updated_at")
    list_filter = ("status", graph_filter("graph"), "reviewer_group", age_filter("created_at"))
    search_fields = ("title", "requester__username")
    list_select_related = ("requester", "reviewer_group")
    show_full_result_count = False
    readonly_fields = ("id", "graph", "status", "requester", "created_at", "updated_at", "audit")
    fields = (
        "id",
        "title",
        "graph",
        "status",
        "requester",
        "reviewer_group",
        "metadata",
        "created_at",
        "updated_at",
        "audit",
    )
    inlines = [RunInline, InterruptInline, ArtifactInline]
    actions = ["cancel_threads"]

    @admin.display(description="Audit trail")
    def audit(self, obj):
        if obj is None or obj.pk is None:
            return "—"
        return _audit_html(audit_for_thread(obj, limit=AUDIT_TRAIL_LIMIT))

    def has_add_permission(self, request):
        return False  # threads start through the app or the API (runs.run_start)

    def delete_queryset(self, request, queryset):
        gone = [(t.pk, list(t.runs.values_list("pk", flat=True))) for t in queryset]
        super().delete_queryset(request, queryset)
        for thread_id, run_ids in gone:
            transaction.on_commit(partial(listeners.thread_forget, thread_id, run_ids))

    def delete_model(self, request, obj):
        self.delete_queryset(request, Thread.objects.filter(pk=obj.pk))

    @admin.action(
        description="Cancel selected threads (pending interrupts, running runs)",
        permissions=["change"],
    )
    def cancel_threads(self, request, queryset):
        done, failed = 0, []
        for thread in queryset:
            try:
                runs.thread_cancel(thread=thread, user=request.user)
            except errors.ServiceError as exc:
                failed.append(f"{thread}: {exc.message}")
            else:
                done += 1
        _report(self, request, done, "thread cancelled", "threads cancelled", failed)


@admin.register(Run)
class RunAdmin(UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "thread",
        "kind",
        "status",
        "attempts",
        "lease_owner",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "kind", graph_filter("thread__graph"), age_filter("created_at"))
    search_fields = ("thread__title",)
    uuid_search_fields = ("pk", "thread_id")
    list_select_related = ("thread",)
    show_full_result_count = False
    # A webhook URL may be a catch-hook whose path is the credential: its host only.
    readonly_fields = [f.name for f in Run._meta.fields if f.name != "webhook"] + ["webhook_to"]
    exclude = ("webhook",)
    actions = ["retry_runs"]

    @admin.display(description="webhook")
    def webhook_to(self, obj) -> str:
        return masked_url(obj.webhook)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # a run's interrupts and the checkpoint history depend on it

    @admin.action(
        description="Retry selected failed runs from their last checkpoint", permissions=["change"]
    )
    def retry_runs(self, request, queryset):
        done, failed = 0, []
        for pk in queryset.values_list("pk", flat=True):
            try:
                ops_services.run_retry(run_id=pk, user=request.user)
            except errors.ServiceError as exc:
                failed.append(f"{pk}: {exc.message}")
            else:
                done += 1
        _report(self, request, done, "run queued again", "runs queued again", failed)


class ReassignForm(forms.Form):
    group = forms.ModelChoiceField(queryset=Group.objects.order_by("name"), label="Reviewer group")
    reason = forms.CharField(required=False, max_length=200)


@admin.register(HumanInterrupt)
class HumanInterruptAdmin(UuidSearchMixin, admin.ModelAdmin):
    list_display = (
        "action",
        "kind",
        "thread",
        "status",
        "reviewer_group",
        "response_type",
        "responded_by",
        "decided_by_rule",
        "approvals_required",
        "expires_at",
        "created_at",
    )
    list_filter = (
        "status",
        "kind",
        "reviewer_group",
        "response_type",
        graph_filter("thread__graph"),
        age_filter("created_at"),
    )
    search_fields = ("action", "thread__title", "interrupt_id")
    uuid_search_fields = ("pk", "thread_id")
    list_select_related = ("thread", "reviewer_group", "responded_by")
    show_full_result_count = False
    # Routing changes go through the reassign action (audited, pushed live).
    readonly_fields = [f.name for f in HumanInterrupt._meta.fields] + ["audit"]
    actions = ["reassign_interrupts", "expire_interrupts"]

    @admin.display(description="Audit trail")
    def audit(self, obj):
        if obj is None or obj.pk is None:
            return "—"
        events = obj.audit_events.select_related("actor").order_by("created_at", "id")
        return _audit_html([audit_entry(e) for e in events[:AUDIT_TRAIL_LIMIT]])

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(
        description="Expire selected pending interrupts (apply their expiry policy)",
        permissions=["change"],
    )
    def expire_interrupts(self, request, queryset):
        done, failed = 0, []
        for pk in queryset.values_list("pk", flat=True):
            try:
                ops_services.interrupt_expire(interrupt_id=pk, user=request.user)
            except errors.ServiceError as exc:
                failed.append(f"{pk}: {exc.message}")
            else:
                done += 1
        _report(self, request, done, "interrupt expired", "interrupts expired", failed)

    @admin.action(
        description="Reassign selected pending interrupts to another group", permissions=["change"]
    )
    def reassign_interrupts(self, request, queryset):
        form = ReassignForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            done, failed = 0, []
            for pk in queryset.values_list("pk", flat=True):
                try:
                    ops_services.interrupt_reassign(
                        interrupt_id=pk,
                        group=form.cleaned_data["group"],
                        user=request.user,
                        reason=form.cleaned_data["reason"],
                    )
                except errors.ServiceError as exc:
                    failed.append(f"{pk}: {exc.message}")
                else:
                    done += 1
            _report(self, request, done, "interrupt reassigned", "interrupts reassigned", failed)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Reassign interrupts",
            "opts": self.model._meta,
            "form": form,
            "interrupts": queryset.select_related("thread", "reviewer_group")[:500],
            "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across", "0"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/hitl/reassign_interrupts.html", context)


@admin.register(Artifact)
class ArtifactAdmin(UuidSearchMixin, admin.ModelAdmin):
    list_display = ("path", "thread", "size", "mime", "created_at")
    list_filter = (age_filter("created_at"),)
    search_fields = ("path", "thread__title")
    uuid_search_fields = ("pk", "thread_id")
    list_select_related = ("thread",)
    show_full_result_count = False
    readonly_fields = [f.name for f in Artifact._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(UuidSearchMixin, admin.ModelAdmin):
    """The trail is append-only: viewable, never added, changed or deleted here."""

    list_display = ("created_at", "kind", "thread", "interrupt", "actor", "summary")
    list_filter = ("kind", age_filter("created_at"))
    search_fields = ("thread__title", "actor__username")
    uuid_search_fields = ("thread_id", "run_id", "interrupt_id")
    list_select_related = ("thread", "interrupt", "actor")
    show_full_result_count = False
    ordering = ("-created_at", "-id")
    readonly_fields = ("created_at", "kind", "thread", "run", "interrupt", "actor", "details")
    fields = readonly_fields

    @admin.display(description="Summary")
    def summary(self, obj):
        return audit_entry(obj).summary

    @admin.display(description="Details")
    def details(self, obj):
        return _audit_html([audit_entry(obj)])

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("event", "url_to", "status", "attempts", "response_status", "created_at")
    list_filter = ("status", age_filter("created_at"))
    search_fields = ("event",)  # not the URL: a search would be an oracle for it
    list_select_related = ("run",)
    show_full_result_count = False
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields if f.name != "url"] + ["url_to"]
    exclude = ("url",)

    @admin.display(description="URL")
    def url_to(self, obj) -> str:
        return masked_url(obj.url)

    def has_add_permission(self, request):
        return False


@admin.register(ToolExecution)
class ToolExecutionAdmin(admin.ModelAdmin):
    """The ledger of approved tool calls (read-only): what ran, once, and its result."""

    list_display = ("tool", "thread", "status", "started_at", "finished_at")
    list_filter = ("status", age_filter("started_at"))
    search_fields = ("tool", "tool_call_id", "interrupt_id")
    show_full_result_count = False
    readonly_fields = [f.name for f in ToolExecution._meta.fields]

    def has_add_permission(self, request):
        return False


class ReviewerGroupPolicyForm(forms.ModelForm):
    class Meta:
        model = ReviewerGroupPolicy
        fields = (
            "group",
            "expire_after_seconds",
            "expiry_policy",
            "expiry_message",
            "escalate_to",
            "approvals_required",
            "approval_groups",
            "allow_self_approval",
            "reject_ends",
            "rule_counts_as_approval",
        )
        labels = {"expire_after_seconds": "Expire after (seconds)"}
        help_texts = {
            "group": "The reviewer group (a Django group) these defaults are for.",
            "expire_after_seconds": (
                "How long an item routed to this group may wait for a decision, e.g. 3600 "
                "for an hour; then the expiry policy applies. Empty: items wait forever, "
                "unless the agent gives its own expires_in."
            ),
            "expiry_policy": (
                "What happens to an item that expires: auto-ignore (the agent gets ignore), "
                "auto-respond (the agent gets the expiry message as the answer), or escalate "
                "(the item moves to the group below, and that group's policy applies)."
            ),
            "expiry_message": (
                "The answer auto-respond sends, also noted in the audit trail. Empty: "
                f"“{ops_services.DEFAULT_EXPIRY_MESSAGE}”"
            ),
            "escalate_to": (
                "For escalate: the group an expired item moves to (another group). An item "
                "moves at most HITL_MAX_ESCALATIONS times."
            ),
            "approvals_required": (
                "Four-eyes: how many different reviewers must approve (accept or edit) the "
                "same args before the agent goes on. 1: one reviewer decides. 1 to 20."
            ),
        }

    def clean(self):
        data = super().clean()
        if data.get("expiry_policy") == "escalate" and not data.get("escalate_to"):
            self.add_error("escalate_to", "Escalation needs a group to escalate to.")
        if data.get("escalate_to") and data.get("escalate_to") == data.get("group"):
            self.add_error("escalate_to", "A group cannot escalate to itself.")
        required = data.get("approvals_required")
        if required is not None and not 1 <= required <= 20:
            self.add_error("approvals_required", "Ask for between 1 and 20 approvals.")
        return data


@admin.register(ReviewerGroupPolicy)
class ReviewerGroupPolicyAdmin(admin.ModelAdmin):
    form = ReviewerGroupPolicyForm
    list_display = (
        "group",
        "expire_after_seconds",
        "expiry_policy",
        "escalate_to",
        "approvals_required",
    )
    list_select_related = ("group", "escalate_to")
    list_filter = ("expiry_policy",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at")
    list_select_related = ("user",)
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Who signed in through SSO as whom; deleting one unlinks it (the next login makes a
    new user). Written only by logins."""

    list_display = ("user", "subject", "issuer", "claim_values", "last_login_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "claim_values", "created_at", "last_login_at")

    def has_add_permission(self, request) -> bool:
        return False


def _report(model_admin, request, done: int, one: str, many: str, failed: list[str]) -> None:
    if done:
        model_admin.message_user(
            request, f"{done} {one if done == 1 else many}.", level=messages.SUCCESS
        )
    for problem in failed[:20]:
        model_admin.message_user(request, problem, level=messages.WARNING)
    if len(failed) > 20:
        model_admin.message_user(request, f"… and {len(failed) - 20} more.", messages.WARNING)


# Decision rules and remote deployments have their own modules (kept small); importing
# them registers them.
from hitl.ops import remote_admin, rules_admin  # noqa: E402, F401
