"""Without HITL_DATABASE_POOLER=pgbouncer, a worker behind PgBouncer in transaction mode
fails: the statements it prepares in one server session are looked for in another. The
switch is what makes tests/ops/test_pgbouncer.py pass (a module of its own: its worker
must be the only one taking runs).
"""

from __future__ import annotations

import pytest

from hitl.core import runs
from tests.async_graphs import ASYNC_GRAPHS, TARGETS
from tests.conftest import start_celery_worker, wait_for
from tests.ops.conftest import OPS_ENV, SESSION_ERRORS

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def async_graphs(monkeypatch):
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


def test_a_worker_without_the_switch_meets_prepared_statement_errors(
    pgbouncer, transactional_db, requester, tmp_path
):
    worker = start_celery_worker(
        pgbouncer.url(),
        tmp_path / "worker.log",
        name="unswitched",
        pool="threads",
        concurrency=8,
        **{**OPS_ENV, "HITL_EXTRA_GRAPHS": ASYNC_GRAPHS, "HITL_DATABASE_POOLER": ""},
    )
    try:
        for _ in range(8):
            runs.run_start(graph="async_gated", input={}, user=requester)
        wait_for(
            lambda: SESSION_ERRORS.search(worker.output()),
            60,
            0.1,
            "a prepared-statement error in the worker's log",
        )
    finally:
        worker.stop()
