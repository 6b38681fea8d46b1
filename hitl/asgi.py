"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

import asyncio
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")

import django  # noqa: E402

django.setup(set_prefix=False)

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from hitl.compat import daphne as compat_daphne  # noqa: E402
from hitl.middleware import ASGIHandler  # noqa: E402

# Django parses POST bodies; daphne's Twisted requests must not parse them too. daphne
# writes the access log; Twisted's factory must not format a second line per request.
compat_daphne.raw_request_bodies()
compat_daphne.one_access_log()

# Static files are served at the ASGI layer, so every middleware stays async-capable
# and async views (long-polls, streams) never block a thread. Django's own middleware
# runs without a thread hop per method (hitl/middleware.py).
django_asgi = ASGIStaticFilesHandler(ASGIHandler())

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from hitl.core.live.publisher import publisher  # noqa: E402
from hitl.ops import maintenance  # noqa: E402
from hitl.review.routing import websocket_urlpatterns  # noqa: E402

router = ProtocolTypeRouter(
    {
        "http": django_asgi,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)


from hitl.security import ClientAddressMiddleware  # noqa: E402

router = ClientAddressMiddleware(router)

from hitl import heap  # noqa: E402

# Everything the server serves is loaded: keep it out of the collector's walks.
heap.settle()


async def application(scope, receive, send):
    # In-process runs publish live events on the server's own loop.
    publisher.bind_loop(asyncio.get_running_loop())
    # Without Celery beat (embedded default) this process expires interrupts itself.
    maintenance.start_inprocess_sweeper()
    return await router(scope, receive, send)
