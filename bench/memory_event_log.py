"""What one append to the embedded default's event log costs, by how many threads the
process has seen within the log's hour.

Without Redis (`make run`), a run's stream events go to an in-process log
(hitl/core/live/eventlog.py `_MemoryLog`) whose threads expire an hour after their last
event. Each append first expires what is over the hour. The log is filled with N threads,
then 2,000 appends go to 50 of them; the figure is the mean time per append.

    .venv/bin/python bench/memory_event_log.py --threads 1000,10000,50000

Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="100,1000,10000")
    parser.add_argument("--appends", type=int, default=2000)
    args = parser.parse_args()
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")
    import django

    django.setup()
    from hitl.core.live import eventlog

    print(f"{'threads seen':>12}  {'us per append':>13}")
    for n in [int(x) for x in args.threads.split(",") if x.strip()]:
        log = eventlog._MemoryLog()
        for i in range(n):
            log.append(f"t{i}", {"i": i})
        began = time.perf_counter()
        for i in range(args.appends):
            log.append(f"t{i % 50}", {"i": i})
        per = (time.perf_counter() - began) / args.appends * 1e6
        print(f"{n:>12}  {per:>13.1f}")


if __name__ == "__main__":
    main()
