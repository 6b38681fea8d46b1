from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from hitl import ops, views
from hitl.api import api

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("threads/<uuid:thread_id>/", views.thread_detail, name="thread"),
    path("threads/<uuid:thread_id>/status/", views.thread_status, name="thread-status"),
    path("threads/<uuid:thread_id>/cancel/", views.thread_cancel, name="thread-cancel"),
    path("interrupts/<uuid:interrupt_id>/decide/", views.interrupt_decide, name="interrupt-decide"),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
    # Operations (hitl/ops.py).
    path("healthz", ops.healthz, name="healthz"),
    path("metrics", ops.metrics, name="metrics"),
    path("analytics/", ops.analytics, name="analytics"),
]
