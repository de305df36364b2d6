"""The Django admin for review: runs, requests and policies searchable; the audit trail strictly read-only.

Runs and requests are read-only here too: a request's state changes only through the one
door (review/decisions.py), a run's only in models/run_state.py, each with its audit event. Policies
are edited here.
"""

from typing import Any

from django.contrib import admin
from django.db import models
from django.db.models import Model
from django.http import HttpRequest

from approvals.models import AuditEvent, ConsoleProcess, Policy, Request, RequestApproval, Run


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable and searchable; never added, changed or deleted from the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        return {}  # no "delete selected"


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class RequestApprovalInline(ReadOnlyInline):
    model = RequestApproval
    fields = ("user", "comment", "data", "created_at")
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "tool", "status", "started_by", "owner", "created_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("=id", "tool", "started_by__username", "result_output", "owner")
    date_hierarchy = "created_at"
    list_select_related = ("started_by",)


@admin.register(Request)
class RequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "tool", "status", "run", "answered_by", "created_at", "answered_at")
    list_filter = ("status", "kind")
    search_fields = ("id", "prompt", "tool", "answered_by__username", "comment")
    date_hierarchy = "created_at"
    list_select_related = ("answered_by", "run")
    inlines = [RequestApprovalInline]


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "enabled",
        "priority",
        "tool_pattern",
        "kind",
        "quorum",
        "starter_may_answer",
        "confirm_approval",
        "on_timeout",
        "webhook_url",
    )
    list_editable = ("enabled", "priority")
    list_filter = ("enabled", "kind")
    search_fields = ("name", "tool_pattern", "kind")
    filter_horizontal = (
        "allowed_users",
        "allowed_groups",
        "assigned_users",
        "assigned_groups",
        "fallback_users",
        "fallback_groups",
    )
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = (
        (None, {"fields": ("name", "enabled", "priority")}),
        ("Which requests", {"fields": ("tool_pattern", "kind")}),
        (
            "Who may answer",
            {"fields": ("allowed_users", "allowed_groups", "quorum", "starter_may_answer", "confirm_approval")},
        ),
        ("Assigned to", {"fields": ("assigned_users", "assigned_groups")}),
        ("Notifications", {"fields": ("webhook_url", "remind_minutes_before")}),
        (
            "When a reviewer declines",
            {
                "fields": ("reject_options",),
                "description": 'Named reasons to pick, e.g. [{"key": "too_large", "label": "Too large", "text": '
                '"Refunds above 100 EUR need a manager; ask the user to split it."}]. The label is what the reviewer '
                "reads; the text is what the model reads after the decline.",
            },
        ),
        (
            "When nobody answers in time",
            {
                "fields": (
                    "on_timeout",
                    "fallback_users",
                    "fallback_groups",
                    "escalation_step_minutes",
                    "max_escalations",
                ),
                "description": "Decline is the default: silence is not consent. A request may ask for a stricter "
                "outcome (its data.on_timeout), never a more lenient one.",
            },
        ),
    )


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "actor", "action", "tool", "kind", "run", "request")
    list_filter = ("action", "kind")
    search_fields = ("=id", "actor", "tool", "request__id")
    date_hierarchy = "created_at"
    readonly_fields = [field.name for field in AuditEvent._meta.fields]
    show_full_result_count = False  # no COUNT(*) over 100,000 rows on every page


@admin.register(ConsoleProcess)
class ConsoleProcessAdmin(ReadOnlyAdmin):
    """The console processes that beat (rows of stopped ones are dropped by the live ones)."""

    list_display = ("id", "hostname", "pid", "started_at", "last_beat")
    search_fields = ("id", "hostname")
