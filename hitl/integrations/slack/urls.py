from django.urls import path

from hitl.integrations.slack import views

urlpatterns = [
    # The Slack app's interactivity Request URL: button presses and the Respond form.
    path("slack/interactivity/", views.slack_interactivity, name="slack-interactivity"),
]
