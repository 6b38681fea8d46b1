"""A worker told to stop (SIGTERM) finishes the runs it holds, then exits at once."""

from __future__ import annotations

import signal
import time

import pytest
from django.db.models import Max

from hitl.core import runs
from hitl.core.models import Run
from tests.conftest import wait_for
from tests.ops.conftest import OPS_ENV

pytestmark = pytest.mark.postgres

RUNS = 64
MODEL_SECONDS = "4"  # each run's one model call (the scripted model's delay)
# What the process may take between its last run's end and its exit: its hooks close
# pools and connections; no timer, no join with a timeout, no walk over its heap. It
# takes ~0.2 s; interpreter finalization's garbage collections alone took 0.9-4.6 s.
EXIT_SECONDS = 1.0


def test_a_worker_stopped_with_runs_in_flight_exits_once_they_are_done(
    worker_factory, transactional_db, requester
):
    worker = worker_factory(
        "stopping",
        pool="threads",
        concurrency=RUNS * 2,
        **{**OPS_ENV, "HITL_RUNS_PER_WORKER": str(RUNS * 2), "HITL_SCRIPTED_DELAY": MODEL_SECONDS},
    )
    ids = [
        runs.run_start(graph="demo", input={}, user=requester, title="report").pk
        for _ in range(RUNS)
    ]
    # Every run taken, none left in the queue. Not all awaiting the model at once: on a
    # busy machine the first may have ended before the worker began the last.
    wait_for(
        lambda: not Run.objects.filter(pk__in=ids, status="queued").exists(),
        60,
        0.05,
        f"the worker to take all {RUNS} runs",
    )
    # The last one taken has just begun its model call: runs are in flight.
    assert Run.objects.filter(pk__in=ids, status="running").exists()

    worker.popen.send_signal(signal.SIGTERM)  # warm shutdown: it finishes what it holds
    wait_for(lambda: worker.popen.poll() is not None, 60, 0.02, "the worker to exit")
    exited = time.time()

    statuses = Run.objects.filter(pk__in=ids).values_list("status", flat=True)
    assert sorted(statuses) == ["interrupted"] * RUNS, worker.output()[-3000:]
    last_end = Run.objects.filter(pk__in=ids).aggregate(last=Max("finished_at"))["last"]
    lingered = exited - last_end.timestamp()
    print(f"exited {lingered:.2f} s after its last run ended")
    assert lingered < EXIT_SECONDS, f"exited {lingered:.1f} s after its last run ended"
    assert worker.popen.returncode == 0, worker.output()[-3000:]
