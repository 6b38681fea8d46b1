from django.contrib import admin
from django.urls import path

from hitl.api.agui import api as agui_api
from hitl.api.langgraph.api import api as lgapi
from hitl.api.v1 import api
from hitl.integrations.email import urls as email_urls
from hitl.integrations.slack import urls as slack_urls
from hitl.ops import remote_views, thread_actions
from hitl.ops import views as ops
from hitl.review import (
    batch,
    bulk_views,
    claim_views,
    notify_views,
    run_actions,
    sso,
    timetravel,
    tokens,
    views,
)

urlpatterns = [
    # The APIs first: most requests are theirs, and Django tries each pattern in turn
    # (a /langgraph/ path resolves in half the time; docs/benchmarks.md). No pattern
    # below starts with their prefixes.
    path("langgraph/", lgapi.urls),  # LangGraph-Server-compatible API
    path("api/v1/", api.urls),
    # Reviewer web app pages (hitl/review/views.py).
    path("", views.inbox, name="home"),
    path("login/", sso.LoginView.as_view(), name="login"),
    path("logout/", sso.LogoutView.as_view(), name="logout"),
    # Single sign-on (OpenID Connect): 404 unless configured. The redirect URI to register
    # at the provider is <public URL>/sso/callback/.
    path("sso/login/", sso.SsoLoginView.as_view(), name="sso-login"),
    path("sso/callback/", sso.SsoCallbackView.as_view(), name="sso-callback"),
    path("threads/new/", views.thread_new, name="thread-new"),
    path("threads/<uuid:thread_id>/", views.thread_detail, name="thread"),
    path("threads/<uuid:thread_id>/live/", views.thread_live, name="thread-live"),
    path("threads/<uuid:thread_id>/status/", views.thread_status, name="thread-status"),
    path("threads/<uuid:thread_id>/cancel/", views.thread_cancel, name="thread-cancel"),
    path("threads/<uuid:thread_id>/decide-all/", batch.thread_decide_all, name="thread-decide-all"),
    path("threads/<uuid:thread_id>/rerun/", run_actions.thread_rerun, name="thread-rerun"),
    path("threads/<uuid:thread_id>/retry/", thread_actions.thread_retry, name="thread-retry"),
    path("threads/<uuid:thread_id>/fork/", timetravel.thread_fork, name="thread-fork"),
    path("threads/<uuid:thread_id>/history/", timetravel.thread_history, name="thread-history"),
    path(
        "threads/<uuid:thread_id>/files/<uuid:artifact_id>/",
        views.artifact_download,
        name="artifact",
    ),
    path(
        "remote/<slug:name>/webhook/<str:token>/",
        remote_views.remote_webhook,
        name="remote-webhook",
    ),
    path("interrupts/next/", views.interrupt_next, name="interrupt-next"),
    path("interrupts/bulk/", bulk_views.interrupt_bulk, name="interrupt-bulk"),
    path("interrupts/bulk/undo/", bulk_views.interrupt_bulk_undo, name="interrupt-bulk-undo"),
    path("interrupts/<uuid:interrupt_id>/decide/", views.interrupt_decide, name="interrupt-decide"),
    path("interrupts/<uuid:interrupt_id>/undo/", views.interrupt_undo, name="interrupt-undo"),
    path(
        "interrupts/<uuid:interrupt_id>/claim/", claim_views.interrupt_claim, name="interrupt-claim"
    ),
    path(
        "interrupts/<uuid:interrupt_id>/unclaim/",
        claim_views.interrupt_unclaim,
        name="interrupt-unclaim",
    ),
    path(
        "interrupts/<uuid:interrupt_id>/snooze/",
        claim_views.interrupt_snooze,
        name="interrupt-snooze",
    ),
    path(
        "interrupts/<uuid:interrupt_id>/unsnooze/",
        claim_views.interrupt_unsnooze,
        name="interrupt-unsnooze",
    ),
    path(
        "interrupts/<uuid:interrupt_id>/outcome/",
        views.interrupt_outcome,
        name="interrupt-outcome",
    ),
    path("tokens/", tokens.token_list, name="tokens"),
    # Notifications: a message's signed deep link, and my preferences.
    path("n/<str:token>/", notify_views.notification_open, name="notify-open"),
    path(
        "settings/notifications/",
        notify_views.notification_preferences,
        name="notify-preferences",
    ),
    # One-click decisions from e-mail and Slack buttons (issue 30): each channel's package
    # owns its URLs (spliced in, not include()d: every route stays a top-level pattern).
    *email_urls.urlpatterns,
    *slack_urls.urlpatterns,
    path("tokens/<int:token_id>/revoke/", tokens.token_revoke, name="token-revoke"),
    path("agui/", agui_api.urls),
    path("admin/login/", sso.admin_login),
    path("admin/", admin.site.urls),
    # Operations (hitl/ops/views.py).
    path("healthz", ops.healthz, name="healthz"),
    path("metrics", ops.metrics, name="metrics"),
    path("analytics/", ops.analytics, name="analytics"),
]

handler400 = "hitl.inputs.bad_request"
handler500 = "hitl.outage.handler500"
