"""daphne's Twisted request class, told to leave POST bodies unparsed, and its HTTP
factory, told to leave the access log to daphne.

Twisted parses every POST's Content-Type (through the email package) and reads a form
or multipart body into `request.args`, a copy daphne never reads: it hands the raw body
to Django, which parses it once. Twisted's Request takes `parsePOSTFormSubmission=False`
for this; daphne 4.2 builds its requests without it, so its request class gets that
default here (in the server process, before it serves).

Twisted's HTTP factory also formats an access log line per request (the NCSA combined
format, 1.3% of the embedded server's CPU at 8 clients) for Twisted's own log, which
daphne at its default verbosity sends nowhere and above it to the `daphne.server`
logger, a copy of the line daphne's access log writes. Pinned by tests/compat.
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


def _no_twisted_access_line(self, request) -> None:
    """daphne's access log (`AccessLogGenerator`) is the one written."""


def one_access_log() -> None:
    """Keep daphne's access log only: its HTTP factory no longer formats Twisted's."""
    from daphne import http_protocol

    http_protocol.HTTPFactory.log = _no_twisted_access_line
