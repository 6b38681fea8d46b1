"""One meaning of "later" per executor, and an executor setting checked at startup."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hitl.core import later
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent.parent


def test_an_unknown_executor_stops_startup_naming_the_allowed_values():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hitl.settings", "HITL_EXECUTOR": "celeri"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "HITL_EXECUTOR='celeri' is not one of: celery, inprocess, manual." in result.stderr


def test_an_executor_changed_to_nonsense_later_is_refused_too(settings):
    settings.HITL_EXECUTOR = "threads"
    with pytest.raises(Exception, match="is not one of: celery, inprocess, manual"):
        later.later("hitl.example", 1)


def test_manual_holds_the_work_until_the_caller_runs_it(settings):
    settings.HITL_EXECUTOR = "manual"
    done = []
    assert later.later("hitl.a", 1, countdown=30, local=done.append) is True
    later.later("hitl.b", 2, local=done.append)
    assert done == [] and [h.task for h in later.held()] == ["hitl.a", "hitl.b"]
    assert later.run_held("hitl.b") == 1
    assert done == [2] and [h.task for h in later.held()] == ["hitl.a"]
    assert later.run_held() == 1 and done == [2, 1] and later.held() == []


def test_inprocess_runs_the_work_on_a_thread_of_this_process(settings):
    settings.HITL_EXECUTOR = "inprocess"
    ran_on = []
    later.later(
        "hitl.a", "x", local=lambda value: ran_on.append((value, threading.current_thread()))
    )
    wait_for(lambda: ran_on, what="the work to run")
    ((value, thread),) = ran_on
    assert value == "x" and thread is not threading.current_thread() and thread.daemon


def test_inprocess_work_that_only_queues_is_queued_on_the_callers_thread(settings):
    """A run handed to the run threads needs no thread started for it; with a countdown,
    a timer thread still waits it out."""
    settings.HITL_EXECUTOR = "inprocess"
    queued_on = []
    started = threading.active_count()
    assert later.later(
        "hitl.a", 1, local=lambda _: queued_on.append(threading.current_thread()), queues=True
    )
    assert queued_on == [threading.current_thread()]
    assert threading.active_count() == started

    later.later(
        "hitl.a",
        2,
        countdown=0.01,
        local=lambda _: queued_on.append(threading.current_thread()),
        queues=True,
    )
    wait_for(lambda: len(queued_on) == 2, what="the delayed work to be queued")
    assert queued_on[1] is not threading.current_thread()


def test_inprocess_work_that_cannot_be_queued_is_a_failed_send(settings, caplog):
    settings.HITL_EXECUTOR = "inprocess"

    def shut_down(_):
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    assert later.later("hitl.a", 1, local=shut_down, queues=True) is False
    assert "could not queue hitl.a" in caplog.text


def test_the_broker_is_used_only_by_celery(settings):
    settings.HITL_EXECUTOR = "celery"
    assert later.uses_broker()
    settings.HITL_EXECUTOR = "inprocess"
    assert not later.uses_broker()
