"""Admin for decision rules: refused on save when broken; hits and dry-run agreement shown."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils.html import format_html

from hitl.core.decisions import rules
from hitl.core.decisions.rule_stats import rule_stats
from hitl.core.models import DecisionRule, RuleHit


class DecisionRuleForm(forms.ModelForm):
    class Meta:
        model = DecisionRule
        fields = (
            "name",
            "mode",
            "priority",
            "graph",
            "action",
            "reviewer_group",
            "condition",
            "outcome",
            "response_text",
        )
        widgets = {"condition": forms.Textarea(attrs={"rows": 3, "cols": 80})}

    def clean(self):
        data = super().clean()
        try:
            rules.condition_check(data.get("condition") or "", action=data.get("action") or "")
        except rules.RuleError as exc:
            self.add_error("condition", str(exc))
        if (
            data.get("outcome") == DecisionRule.Outcome.RESPOND
            and not (data.get("response_text") or "").strip()
        ):
            self.add_error("response_text", "A rule that responds needs the text it sends.")
        return data


@admin.register(DecisionRule)
class DecisionRuleAdmin(admin.ModelAdmin):
    form = DecisionRuleForm
    list_display = (
        "name",
        "version",
        "mode",
        "priority",
        "action",
        "outcome",
        "dry_run_hits",
        "live_decisions",
        "errors",
        "agreement",
    )
    list_editable = ("mode", "priority")
    list_filter = ("mode", "outcome", "graph", "reviewer_group")
    ordering = ("priority", "id")
    readonly_fields = ("version", "evidence")

    def get_queryset(self, request):
        self._stats = {s.rule.pk: s for s in rule_stats()}
        return super().get_queryset(request).select_related("reviewer_group")

    def _stat(self, obj):
        stats = getattr(self, "_stats", None)
        if stats is None or obj.pk not in stats:
            self._stats = {s.rule.pk: s for s in rule_stats()}
        return self._stats.get(obj.pk)

    @admin.display(description="dry-run hits")
    def dry_run_hits(self, obj):
        return self._stat(obj).dry_run_hits

    @admin.display(description="live decisions")
    def live_decisions(self, obj):
        return self._stat(obj).live_decisions

    @admin.display(description="runtime errors")
    def errors(self, obj):
        return self._stat(obj).errors

    @admin.display(description="agrees with people")
    def agreement(self, obj):
        return self._stat(obj).agreement_text

    @admin.display(description="evidence")
    def evidence(self, obj):
        if obj.pk is None:
            return "Save the rule in dry-run mode to collect evidence on real traffic."
        s = self._stat(obj)
        return format_html(
            "{} dry-run hits; agrees with people on {}; {} live decisions; {} skipped "
            "(config or four-eyes); {} runtime errors{}",
            s.dry_run_hits,
            s.agreement_text,
            s.live_decisions,
            s.skipped,
            s.errors,
            f" (last: {s.last_error[:200]})" if s.last_error else "",
        )


@admin.register(RuleHit)
class RuleHitAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "rule",
        "rule_version",
        "mode",
        "outcome",
        "applied",
        "skipped",
        "error",
    )
    list_filter = ("mode", "applied", "rule")
    list_select_related = ("rule",)
    readonly_fields = [f.name for f in RuleHit._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
