from django.urls import path

from hitl.review import consumers

websocket_urlpatterns = [
    path("ws/threads/<uuid:thread_id>/", consumers.ThreadConsumer.as_asgi()),
    path("ws/inbox/", consumers.InboxConsumer.as_asgi()),
]
