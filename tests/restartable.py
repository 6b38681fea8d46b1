"""A daphne the test can kill and start again on the same port, beside one Celery worker
that stays up, for the tests of reconnects across a web restart.

Import `relay_stack` and `relay` into a test module (module-scoped: one worker per
module); `relay` flushes the database for each test as `transactional_db` does.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.api.conftest import STACK_ENV
from tests.api.relay_graphs import RELAY_GRAPHS
from tests.conftest import (
    ROOT,
    Proc,
    free_port,
    service_env,
    spawn,
    start_celery_worker,
    wait_for,
    web_command,
)

RELAY_ENV = {
    **STACK_ENV,
    "HITL_EXTRA_GRAPHS": RELAY_GRAPHS,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


@dataclass
class RestartableStack:
    database_url: str
    port: int
    log_dir: Path
    web: Proc | None = None
    starts: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_web(self) -> None:
        """Start daphne on the stack's port; return once it listens."""
        self.starts += 1
        self.web = spawn(
            web_command(self.port),
            service_env(self.database_url, **RELAY_ENV),
            self.log_dir / f"daphne-{self.starts}.log",
        )

        def up() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(up, 30, 0.05, "daphne to listen")

    def kill_web(self) -> None:
        """SIGKILL daphne: its open streams end without a word, as in a crash."""
        assert self.web is not None
        self.web.stop(signal.SIGKILL)

    def web_log(self) -> str:
        assert self.web is not None
        return self.web.output()


@pytest.fixture(scope="module")
def relay_stack(test_database_url, tmp_path_factory) -> Iterator[RestartableStack]:
    log_dir = tmp_path_factory.mktemp("relay")
    worker = start_celery_worker(
        test_database_url, log_dir / "celery.log", name="relay", concurrency=2, **RELAY_ENV
    )
    stack = RestartableStack(database_url=test_database_url, port=free_port(), log_dir=log_dir)
    try:
        stack.start_web()
        yield stack
    finally:
        if stack.web is not None:
            stack.web.stop()
        worker.stop()


@pytest.fixture
def relay(relay_stack, transactional_db, monkeypatch) -> RestartableStack:
    """The stack, up (a test that left daphne down gets a new one)."""
    from hitl.core.registry import registry
    from tests.api.relay_graphs import TARGETS

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)
    if relay_stack.web is None or relay_stack.web.popen.poll() is not None:
        relay_stack.start_web()
    return relay_stack
