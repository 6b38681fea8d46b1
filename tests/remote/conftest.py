"""Real LangGraph servers for the remote-deployment tests: `langgraph dev` (in-memory
runtime) and Aegra (on Postgres), installed and started the way bench/peers.py does."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client

from bench import peer_servers
from tests.conftest import free_port, wait_for

GRAPH_FILE = Path(__file__).resolve().parent / "graphs.py"
AUTH_FILE = Path(__file__).resolve().parent / "keyauth.py"
GRAPHS = {
    name: f"{GRAPH_FILE}:{attr}"
    for name, attr in {
        "review": "review_graph",
        "middleware": "middleware_graph",
        "raw": "raw_graph",
    }.items()
}
PG = "postgresql://postgres@127.0.0.1:5432"


class PeerServer:
    """One LangGraph server process on a fixed port, that tests may stop and start again."""

    def __init__(self, kind: str, workdir: Path, *, api_key: str | None = None):
        self.kind, self.workdir, self.api_key = kind, workdir, api_key
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = workdir / f"{kind}.log"
        if kind == "langgraph-dev":
            self.venv = peer_servers.langgraph_dev_venv()
        else:
            self.venv = peer_servers.aegra_venv()
            self.database = f"aegra_{os.environ.get('REDIS_URL', '0')[-1]}_{os.getpid()}"
            peer_servers.recreate_database(PG, self.database)

    def start(self, *, fresh: bool = True) -> None:
        run_dir = self.workdir / "run"
        if self.kind == "langgraph-dev":
            # Run webhooks may call HITL on this machine (refused by default).
            extra: dict = {"webhooks": {"url": {"disable_loopback": False, "require_https": False}}}
            if self.api_key is not None:
                # Keys it accepts are read from a file on each request: tests revoke one.
                (self.workdir / "keys").write_text(self.api_key)
                extra["auth"] = {"path": f"{AUTH_FILE}:auth"}
            argv, env, health = peer_servers.langgraph_dev_command(
                self.venv, run_dir, GRAPHS, self.port, fresh=fresh, extra=extra
            )
            env["HITL_TEST_KEYS_FILE"] = str(self.workdir / "keys")
        else:
            argv, env, health = peer_servers.aegra_command(
                self.venv, run_dir, GRAPHS, self.port, f"{PG}/{self.database}"
            )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=run_dir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        peer_servers.wait_http(health, self.proc, 120, self.log)

    def stop(self, *, clean: bool = True) -> None:
        """A clean stop: `langgraph dev` saves its in-memory state for the next start.
        Not `clean`: killed at once (nothing it keeps is needed again).

        Down means its port refuses connections: a server's workers (uvicorn's) may still
        answer on kept-alive connections for a while after the process that started them
        has gone, so the whole process group is stopped and the port is watched.
        """
        if self.proc is None:
            return
        if clean:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        # Whatever of its group outlived it (or all of it, past the timeout) goes now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=5)
        wait_for(self._refused, 30, 0.1, f"{self.kind} to stop listening")

    def _refused(self) -> bool:
        with socket.socket() as probe:
            probe.settimeout(1)
            return probe.connect_ex(("127.0.0.1", self.port)) != 0

    def remove(self) -> None:
        """Stop it and drop what it kept outside its work directory (Aegra's database)."""
        self.stop(clean=False)
        if self.kind == "aegra":
            import psycopg

            with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
                conn.execute(f'drop database if exists "{self.database}" with (force)')

    def client(self):
        return get_sync_client(url=self.base_url, api_key=self.api_key)

    def accept_only(self, key: str) -> None:
        """Revoke every key but `key`."""
        (self.workdir / "keys").write_text(key)
        self.api_key = key

    def interrupted_thread(self, graph: str, **input) -> str:
        """A new remote thread of `graph`, run until it pauses; its id."""
        client = self.client()
        thread = client.threads.create()
        client.runs.wait(thread["thread_id"], graph, input=input or {})
        assert client.threads.get(thread["thread_id"])["status"] == "interrupted"
        return thread["thread_id"]


@pytest.fixture(autouse=True)
def _local_deployments_allowed(settings, monkeypatch):
    """The peers listen on 127.0.0.1: allowed as an operator allows them, explicitly, in
    this process and in the daphne and Celery processes a test starts (their environment)."""
    settings.HITL_REMOTE_HOSTS = ["127.0.0.1:*"]
    settings.HITL_REMOTE_ALLOW_PRIVATE = True
    monkeypatch.setenv("HITL_REMOTE_HOSTS", "127.0.0.1:*")
    monkeypatch.setenv("HITL_REMOTE_ALLOW_PRIVATE", "1")


@pytest.fixture(scope="module", params=["langgraph-dev", "aegra"])
def peer(request, tmp_path_factory) -> Iterator[PeerServer]:
    server = PeerServer(request.param, tmp_path_factory.mktemp(request.param))
    server.start()
    yield server
    server.remove()


@pytest.fixture(scope="module")
def keyed_peer(tmp_path_factory) -> Iterator[PeerServer]:
    """`langgraph dev` that refuses requests without one of its API keys."""
    server = PeerServer("langgraph-dev", tmp_path_factory.mktemp("keyed"), api_key="first-key")
    server.start()
    yield server
    server.remove()
