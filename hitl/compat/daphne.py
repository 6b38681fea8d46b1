"""daphne's Twisted request class, told to leave POST bodies unparsed.

Twisted parses every POST's Content-Type (through the email package) and reads a form
or multipart body into `request.args`, a copy daphne never reads: it hands the raw body
to Django, which parses it once. Twisted's Request takes `parsePOSTFormSubmission=False`
for this; daphne 4.2 builds its requests without it, so its request class gets that
default here (in the server process, before it serves). Pinned by tests/compat.
"""

from __future__ import annotations

VERSION = "4.2"


def raw_request_bodies() -> None:
    """Make daphne's WebRequest default to parsePOSTFormSubmission=False (idempotent)."""
    from daphne import http_protocol

    if getattr(http_protocol.WebRequest, "raw_bodies", False):
        return

    class WebRequest(http_protocol.WebRequest):
        raw_bodies = True

        def __init__(self, *args, **kwargs):
            kwargs["parsePOSTFormSubmission"] = False
            super().__init__(*args, **kwargs)

    http_protocol.WebRequest = WebRequest
