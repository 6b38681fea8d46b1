"""Beat's poll of the remote deployments."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import close_old_connections

from hitl.core.remote.mirror import deployments_poll

log = logging.getLogger(__name__)


@shared_task(name="hitl.remote.poll", ignore_result=True, time_limit=120, soft_time_limit=100)
def remote_poll() -> dict[str, dict[str, int]]:
    """Mirror new remote interrupts and follow mirrored threads (ids only, JSON)."""
    close_old_connections()
    found = deployments_poll()
    if any(r["made"] for r in found.values()):
        log.info("remote poll: %s", found)
    return found
