from django.contrib import admin

from hitl.models import ApiToken, Artifact, HumanInterrupt, Run, Thread


class RunInline(admin.TabularInline):
    model = Run
    extra = 0
    fields = ("kind", "status", "attempts", "created_at", "finished_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True


class InterruptInline(admin.TabularInline):
    model = HumanInterrupt
    extra = 0
    fields = ("action", "status", "reviewer_group", "response_type", "responded_by", "created_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ("title", "graph", "status", "requester", "reviewer_group", "updated_at")
    list_filter = ("status", "graph", "reviewer_group")
    search_fields = ("title", "id", "requester__username")
    list_select_related = ("requester", "reviewer_group")
    readonly_fields = ("id", "graph", "status", "created_at", "updated_at")
    inlines = [RunInline, InterruptInline]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "thread", "kind", "status", "attempts", "created_at", "finished_at")
    list_filter = ("status", "kind")
    list_select_related = ("thread",)
    readonly_fields = [f.name for f in Run._meta.fields]


@admin.register(HumanInterrupt)
class HumanInterruptAdmin(admin.ModelAdmin):
    list_display = (
        "action",
        "kind",
        "thread",
        "status",
        "reviewer_group",
        "response_type",
        "created_at",
    )
    list_filter = ("status", "kind", "reviewer_group")
    search_fields = ("action", "thread__title", "interrupt_id")
    list_select_related = ("thread", "reviewer_group")
    readonly_fields = [f.name for f in HumanInterrupt._meta.fields if f.name != "reviewer_group"]


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ("path", "thread", "size", "mime", "created_at")
    list_select_related = ("thread",)
    readonly_fields = [f.name for f in Artifact._meta.fields]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at")
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")
