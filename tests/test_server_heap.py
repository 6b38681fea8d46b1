"""Server processes keep what they loaded out of the collector's walks (hitl/heap.py)."""

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from celery import signals

from hitl import heap
from hitl.celery import _settle_heap

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def collector_restored():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settling_freezes_what_is_loaded_and_collects_young_objects_less_often(
    collector_restored,
):
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    loaded = [object() for _ in range(10)]
    heap.settle()
    assert gc.get_threshold() == heap.THRESHOLD
    assert gc.get_freeze_count() >= len(loaded)
    # A garbage cycle made afterwards is still collected.
    cycle: list = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


def test_the_asgi_entry_point_settles_its_process():
    # A fresh interpreter, as daphne (and `make run`) loads hitl.asgi:application.
    probe = (
        "import gc, json, hitl.asgi; print(json.dumps([gc.get_threshold(), gc.get_freeze_count()]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    threshold, frozen = json.loads(result.stdout.strip().splitlines()[-1])
    assert tuple(threshold) == heap.THRESHOLD
    assert frozen > 10_000  # Django, Channels and the graphs, not a handful


def test_a_worker_settles_when_ready_and_in_each_forked_child():
    for signal in (signals.worker_ready, signals.worker_process_init):
        # Connected with weak=False: the receivers are held as they are, not as weakrefs.
        assert _settle_heap in [receiver for _, receiver in signal.receivers], signal.name
