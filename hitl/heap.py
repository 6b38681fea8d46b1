"""How a long-lived server process (daphne, a Celery worker) collects its garbage.

Python's cyclic collector, at its defaults (700, 10, 10), cost daphne 6.0-6.3% of its CPU
in the benchmark cycle and the worker 1.2% (bench/peers.py, timed with gc.callbacks):
every few requests a young collection walks what is alive, and now and then a full one
walks the whole heap, most of it the modules, settings and graphs loaded at start. With
what startup built frozen out of the collector's sight and young collections 14x rarer,
it cost 2.0-2.6% and 0.5-0.7%. A larger first threshold bought nothing more (50,000:
2.5%): a young collection's cost follows what is still alive, not how often it runs.
Garbage cycles still go, in collections of at most THRESHOLD[0] objects.
"""

from __future__ import annotations

import gc

THRESHOLD = (10_000, 10, 10)


def settle() -> None:
    """Freeze what this process built so far, and collect young objects less often.

    Call once a server process has loaded what it serves; a fork inherits both.
    """
    gc.collect()  # what startup left unreachable is freed now, not kept forever
    gc.freeze()
    gc.set_threshold(*THRESHOLD)
