"""Graphs and their checkpointer, as every reader of a thread's state gets them."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agents.checkpoint import get_checkpointer
from agents.store import store_for


def checkpointer() -> Any:
    """This process's checkpointer (pooled on PostgreSQL, SQLite embedded)."""
    return get_checkpointer(settings.HITL_CHECKPOINT_URL, settings.HITL_CHECKPOINT_POOL_SIZE)


def store() -> Any:
    """This process's sync store (PostgresStore on the checkpointer's pool, SQLite embedded)."""
    url = settings.HITL_STORE_URL or settings.HITL_CHECKPOINT_URL
    return store_for(url, settings.HITL_CHECKPOINT_POOL_SIZE)
