"""Crons fired by real celery beat processes: each tick starts exactly one run, even
with two beats and racing callers."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.utils import timezone

from hitl.core.models import AuditEvent, Cron, CronFire, Run
from hitl.core.resources.crons import cron_create, crons_fire
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def test_racing_callers_fire_a_tick_once(transactional_db, settings, requester):
    settings.HITL_EXECUTOR = "manual"
    cron = cron_create(user=requester, assistant_id="approval", schedule="* * * * *", payload={})
    later = timezone.now() + timedelta(minutes=3)
    started: list[int] = []
    gate = threading.Barrier(6)

    def fire() -> None:
        try:
            gate.wait()
            started.append(crons_fire(now=later))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=fire) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(started) == 1
    assert CronFire.objects.filter(cron=cron).count() == 1
    assert Run.objects.filter(metadata__cron_id=str(cron.pk)).count() == 1


def test_two_beats_start_one_run_per_tick(
    worker_factory, beat_factory, transactional_db, requester
):
    env = {"HITL_CRON_SWEEP_SECONDS": "0.3"}
    worker_factory("w1", concurrency=2, **env)
    worker_factory("w2", concurrency=2, **env)
    cron = cron_create(
        user=requester, assistant_id="approval", schedule="* * * * * */2", payload={}
    )
    beat_factory(**env)
    beat_factory(**env)

    wait_for(lambda: CronFire.objects.filter(cron=cron).count() >= 3, 60, 0.2, "three ticks")
    Cron.objects.filter(pk=cron.pk).update(enabled=False)
    fires = list(CronFire.objects.filter(cron=cron).order_by("scheduled_for"))
    ticks = [f.scheduled_for for f in fires]
    assert len(set(ticks)) == len(ticks)
    assert all(t.second % 2 == 0 for t in ticks)
    runs = Run.objects.filter(metadata__cron_id=str(cron.pk))
    wait_for(lambda: runs.count() == len(fires), 10, 0.1, "a run per fire")
    assert {f.run_id for f in fires} == set(runs.values_list("pk", flat=True))
    assert len({r.thread_id for r in runs}) == len(fires)  # a new thread each tick
    fired = AuditEvent.objects.filter(kind="cron.fired", data__cron_id=str(cron.pk))
    assert fired.count() >= len(fires)


def test_a_beat_stops_the_cron_of_a_deactivated_owner_and_starts_no_run(
    worker_factory, beat_factory, transactional_db, requester
):
    env = {"HITL_CRON_SWEEP_SECONDS": "0.3"}
    worker_factory("w1", concurrency=1, **env)
    cron = cron_create(user=requester, assistant_id="approval", schedule="* * * * * *", payload={})
    requester.is_active = False
    requester.save(update_fields=["is_active"])
    beat_factory(**env)

    wait_for(lambda: not Cron.objects.get(pk=cron.pk).enabled, 60, 0.2, "the beat to stop the cron")
    stopped = AuditEvent.objects.get(kind="cron.disabled", data__cron_id=str(cron.pk))
    assert stopped.actor_id == requester.pk
    assert "no longer" in stopped.data["reason"]
    assert not Run.objects.filter(metadata__cron_id=str(cron.pk)).exists()
    assert not CronFire.objects.filter(cron=cron, run__isnull=False).exists()
