"""Fixtures for the operations tests: test graphs, celery beat, web servers, a private Redis."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT, Proc, free_port, service_env, spawn, wait_for
from tests.ops.graphs import OPS_GRAPHS, TARGETS

# Worker settings for fault tests: test graphs importable, a short lease (heartbeat every
# lease/3) so the reaper sees a dead worker's run within seconds, and no help from the
# broker: an unacked message would only come back after an hour.
OPS_ENV = {
    "HITL_EXTRA_GRAPHS": OPS_GRAPHS,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "HITL_RUN_LEASE_SECONDS": "2",
    "HITL_VISIBILITY_TIMEOUT": "3600",
}


@pytest.fixture
def ops_graphs(monkeypatch):
    """Register the test graphs in this process's registry."""
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def beat_factory(test_database_url, tmp_path) -> Iterator[Callable[..., Proc]]:
    """Start `celery beat` with its schedule file under tmp_path; stopped at teardown."""
    procs: list[Proc] = []

    def start(**extra_env: str) -> Proc:
        var = tmp_path / f"beat-var-{len(procs)}"
        var.mkdir()
        env = service_env(test_database_url, HITL_VAR_DIR=str(var), **OPS_ENV)
        env.update(extra_env)
        proc = spawn(
            [str(BIN / "celery"), "-A", "hitl", "beat", "-l", "INFO"],
            env,
            tmp_path / f"beat-{len(procs)}.log",
        )
        procs.append(proc)
        wait_for(
            lambda: "beat: Starting" in proc.output() or proc.popen.poll() is not None,
            60,
            0.1,
            "celery beat to start",
        )
        assert proc.popen.poll() is None, proc.output()[-3000:]
        return proc

    yield start
    for proc in procs:
        proc.stop()


@pytest.fixture
def web_factory(test_database_url, tmp_path) -> Iterator[Callable[..., tuple[str, Proc]]]:
    """Start daphne on a free port with extra env; yields (base_url, proc)."""
    procs: list[Proc] = []

    def start(**extra_env: str) -> tuple[str, Proc]:
        port = free_port()
        env = service_env(test_database_url, **OPS_ENV)
        env.update(extra_env)
        proc = spawn(
            [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"],
            env,
            tmp_path / f"daphne-{len(procs)}.log",
        )
        procs.append(proc)
        wait_for(
            lambda: port_open(port) or proc.popen.poll() is not None, 60, 0.1, "daphne to listen"
        )
        assert proc.popen.poll() is None, proc.output()[-3000:]
        return f"http://127.0.0.1:{port}", proc

    yield start
    for proc in procs:
        proc.stop()


class RedisServer:
    """A private redis-server without persistence: a restart loses every message."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: port_open(self.port), 10, 0.05, "redis-server to listen")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        wait_for(lambda: not port_open(self.port), 10, 0.05, "redis-server to stop")


@pytest.fixture
def private_redis(tmp_path) -> Iterator[RedisServer]:
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()
