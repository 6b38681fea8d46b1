"""Django's stock ASGI handler on HITL's settings, for bench/request_overhead.py only."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
