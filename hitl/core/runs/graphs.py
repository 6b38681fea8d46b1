"""Graphs and their checkpointer, as every reader of a thread's state gets them."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agents.checkpoint import get_checkpointer


def checkpointer() -> Any:
    """This process's checkpointer (pooled on PostgreSQL, SQLite embedded)."""
    return get_checkpointer(settings.HITL_CHECKPOINT_URL, settings.HITL_CHECKPOINT_POOL_SIZE)
