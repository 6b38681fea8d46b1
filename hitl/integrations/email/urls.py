from django.urls import path

from hitl.integrations.email import views

urlpatterns = [
    path("settings/notifications/test/", views.notification_test, name="notify-test"),
    # One-click decisions from a notification mail: a confirmation page, then undo.
    path("e/<str:token>/", views.email_action, name="email-action"),
    path("e/<str:token>/undo/", views.email_action_undo, name="email-action-undo"),
]
