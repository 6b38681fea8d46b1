"""This process's Postgres connections, by pool: what /metrics and the worker heartbeat
report (docs/operating.md "Scaling out").

A process holds Django's pool (`DB_POOL_MAX_SIZE`) and one checkpointer pool
(`HITL_CHECKPOINT_POOL_SIZE`) per kind it uses: the sync one (request handlers,
webhook deliveries) and the run engine's async one. LangGraph's store shares the
checkpointer's pool unless HITL_STORE_URL names another database, which then has a pool
of its own (`store`). Its budget is what its open pools may hold together.
"""

from __future__ import annotations

from typing import TypedDict

from django.conf import settings

from agents import pools

POOLS = ("django", "checkpointer", "store")


class ProcessConnections(TypedDict):
    connections: dict[str, int]  # pool -> open now
    budget: int  # what the open pools may hold
    peak: int  # the most held at once since the process started


def _pool_name(pool: pools.Pool) -> str:
    if pool.kind == "django":
        return "django"
    store_url = settings.HITL_STORE_URL
    if store_url and store_url != settings.HITL_CHECKPOINT_URL and pool.url == store_url:
        return "store"
    return "checkpointer"


def process_connections() -> ProcessConnections:
    """This process's open Postgres connections by pool, its budget and its peak."""
    connections = dict.fromkeys(POOLS, 0)
    budget = 0
    for pool in pools.tracked():
        connections[_pool_name(pool)] += pool.size
        budget += pool.max_size
    return {"connections": connections, "budget": budget, "peak": pools.peak()}
