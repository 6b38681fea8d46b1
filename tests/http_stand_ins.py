"""Local HTTP stand-ins (Slack, webhook receivers, a page server) served in a thread.

http.server's serve_forever looks for shutdown() every 0.5 s by default, so each stop
took up to half a second: some 70 s of a suite where a stand-in is made per test.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Any

POLL_SECONDS = 0.02  # how soon serve_forever sees shutdown()


def serve(handler: Any) -> ThreadingHTTPServer:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) with `handler`, serving now."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
    ).start()
    return server


def stop(server: ThreadingHTTPServer) -> None:
    """Stop serving and close the listening socket."""
    server.shutdown()
    server.server_close()
