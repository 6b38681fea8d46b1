"""The web process: daphne, on a uvloop event loop.

    python -m hitl.web -b 127.0.0.1 -p 8000 hitl.asgi:application

takes daphne's own arguments. Daphne builds the event loop Twisted runs on when
`daphne.server` is imported, before it loads the application, so the loop's policy is
set here, ahead of that import; `hitl/asgi.py` would be too late. On uvloop daphne spends
4.3% less CPU per cycle (docs/benchmarks.md, "The collector and the event loops").
"""

from __future__ import annotations

import asyncio
import sys

import uvloop


def main(argv: list[str] | None = None) -> None:
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
