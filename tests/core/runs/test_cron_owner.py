"""A cron acts with its owner's rights at every tick: an owner who may no longer start
runs stops it (audited) instead of starting one. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from hitl.core.models import AuditEvent, Cron, Run
from hitl.core.resources.crons import cron_create, crons_fire
from hitl.core.runs.start import run_start


def test_a_deactivated_owners_cron_is_stopped_at_its_tick(db, settings, requester):
    settings.HITL_EXECUTOR = "manual"
    cron = cron_create(user=requester, assistant_id="approval", schedule="* * * * *", payload={})
    requester.is_active = False
    requester.save(update_fields=["is_active"])

    assert crons_fire(now=timezone.now() + timedelta(minutes=3)) == 0
    assert not Cron.objects.get(pk=cron.pk).enabled
    assert not Run.objects.filter(metadata__cron_id=str(cron.pk)).exists()
    stopped = AuditEvent.objects.get(kind="cron.disabled")
    assert (stopped.actor_id, stopped.data["cron_id"]) == (requester.pk, str(cron.pk))


def test_a_cron_on_a_thread_its_owner_may_no_longer_run_is_stopped(
    db, settings, requester, outsider
):
    settings.HITL_EXECUTOR = "manual"
    # The outsider could run the requester's thread with hitl.run_any_thread; it was taken away.
    thread = run_start(graph="approval", input={}, user=requester).thread
    cron = Cron.objects.create(
        assistant_id="approval",
        thread=thread,
        schedule="* * * * *",
        next_run_date=timezone.now(),
        user=outsider,
    )

    assert crons_fire(now=timezone.now() + timedelta(minutes=1)) == 0
    assert not Cron.objects.get(pk=cron.pk).enabled
    assert Run.objects.filter(thread=thread).count() == 1
    assert AuditEvent.objects.filter(kind="cron.disabled", data__cron_id=str(cron.pk)).exists()


def test_an_active_owners_cron_keeps_firing(db, settings, requester):
    settings.HITL_EXECUTOR = "manual"
    cron = cron_create(user=requester, assistant_id="approval", schedule="* * * * *", payload={})

    assert crons_fire(now=timezone.now() + timedelta(minutes=3)) == 1
    assert Cron.objects.get(pk=cron.pk).enabled
    assert not AuditEvent.objects.filter(kind="cron.disabled").exists()
