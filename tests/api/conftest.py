"""A real daphne server and a real Celery worker shared by a test module, plus helpers.

Started once per module (each start costs seconds); every test still gets a flushed
database through `transactional_db`. Both processes get webhook settings that let
them POST to a receiver on 127.0.0.1 (any port, a loopback address the operator
allows with HITL_WEBHOOK_ALLOW_PRIVATE), with a short backoff.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import http_stand_ins
from tests.conftest import (
    free_port,
    service_env,
    spawn,
    start_celery_worker,
    stop_together,
    wait_for,
    web_command,
)

WEBHOOK_SECRET = "h6-test-webhook-secret"
STACK_ENV = {
    "HITL_WEBHOOK_HOSTS": "127.0.0.1:*",
    "HITL_WEBHOOK_ALLOW_PRIVATE": "1",
    "HITL_WEBHOOK_SECRET": WEBHOOK_SECRET,
    "HITL_WEBHOOK_BACKOFF_SECONDS": "0.2",
    "HITL_WEBHOOK_MAX_ATTEMPTS": "4",
    "HITL_API_WAIT_SECONDS": "30",
}


@dataclass
class Stack:
    base_url: str
    log_dir: Path

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in self.log_dir.glob("*.log"))


def start_daphne(database_url: str, log: Path, *, port: int | None = None, **extra_env: str):
    """daphne on `port` (a free one by default; a restart passes the old one)."""
    proc, base_url, listening = _spawn_daphne(database_url, log, port=port, **extra_env)
    listening()
    return proc, base_url


def _spawn_daphne(database_url: str, log: Path, *, port: int | None = None, **extra_env: str):
    """daphne started; the third value waits until it listens."""
    port = port or free_port()
    proc = spawn(
        web_command(port),
        service_env(database_url, **extra_env),
        log,
    )

    def up() -> bool:
        assert proc.popen.poll() is None, proc.output()[-3000:]
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    return proc, f"http://127.0.0.1:{port}", lambda: wait_for(up, 30, 0.1, "daphne to listen")


@contextlib.contextmanager
def running_stack(database_url: str, log_dir: Path, *, name: str, **env: str) -> Iterator[Stack]:
    """daphne + one Celery worker (concurrency 2), started side by side and stopped
    together: each takes seconds to start."""
    server, base_url, listening = _spawn_daphne(database_url, log_dir / "daphne.log", **env)
    try:
        worker = start_celery_worker(
            database_url, log_dir / "celery.log", name=name, concurrency=2, **env
        )
    except BaseException:
        server.stop()
        raise
    try:
        listening()
        yield Stack(base_url=base_url, log_dir=log_dir)
    finally:
        stop_together(server, worker)


@pytest.fixture(scope="module")
def stack(test_database_url, tmp_path_factory) -> Iterator[Stack]:
    """daphne + one Celery worker on the test database, for the whole module."""
    log_dir = tmp_path_factory.mktemp("stack")
    with running_stack(test_database_url, log_dir, name="h6api", **STACK_ENV) as stack:
        yield stack


@pytest.fixture
def live(stack, transactional_db, settings) -> Stack:
    """The shared stack, with this process's settings matching the servers'."""
    settings.HITL_WEBHOOK_HOSTS = ["127.0.0.1:*"]
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    settings.HITL_WEBHOOK_SECRET = WEBHOOK_SECRET
    return stack


@pytest.fixture(scope="module")
def parity_stack(test_database_url, tmp_path_factory) -> Iterator[Stack]:
    """daphne + one Celery worker that also load tests/api/parity_graphs.py's graphs."""
    from tests.api.parity_graphs import PARITY_GRAPHS

    env = {**STACK_ENV, "HITL_EXTRA_GRAPHS": PARITY_GRAPHS}
    log_dir = tmp_path_factory.mktemp("parity")
    with running_stack(test_database_url, log_dir, name="parity", **env) as stack:
        yield stack


@pytest.fixture
def parity(parity_stack, transactional_db, monkeypatch) -> Stack:
    """The parity stack, with this process's registry knowing its graphs too."""
    from hitl.core.registry import registry
    from tests.api.parity_graphs import TARGETS

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)
    return parity_stack


def token_for(user) -> str:
    from hitl.core.models import ApiToken

    return ApiToken.issue(user=user, name="api-compat")[1]


_open_clients: list[Any] = []


def sdk_client(base_url: str, user):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=f"{base_url}/langgraph", api_key=token_for(user))
    _open_clients.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_sdk_clients():
    """Close every client a test opened: an unclosed socket surfaces in a later test."""
    yield
    while _open_clients:
        _open_clients.pop().close()


# --- a local webhook receiver ---------------------------------------------------------


@dataclass
class Receiver:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_first: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self) -> list[str]:
        with self.lock:
            return [r["json"]["event"] for r in self.requests if r["status"] == 200]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An HTTP server on 127.0.0.1 recording POSTs; fails the first `fail_first` with 500."""
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                status = 500 if len(state.requests) < state.fail_first else 200
                state.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                        "json": json.loads(body or b"null"),
                        "status": status,
                    }
                )
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):  # keep test output quiet
            pass

    server = http_stand_ins.serve(Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield state
    http_stand_ins.stop(server)


# --- SSE parsing ------------------------------------------------------------------


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """(event, data) pairs of a server-sent event stream."""
    out = []
    for block in text.split("\n\n"):
        event, data = "message", []
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        if data:
            out.append((event, json.loads("\n".join(data))))
    return out


def refused_status(call) -> int:
    """The status of the HTTP error `call` raises through langgraph_sdk; its body says why."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        call()
    assert caught.value.response.json()["detail"]
    return caught.value.response.status_code


class StreamsRead:
    """SDK streams read on threads of their own: each one's parts, and what ended one."""

    def __init__(self) -> None:
        self.parts: dict[str, list] = {}
        self.errors: dict[str, BaseException] = {}

    def consume(self, name: str, open_stream) -> threading.Thread:
        self.parts[name] = []

        def run() -> None:
            try:
                for part in open_stream():
                    self.parts[name].append(part)
            except BaseException as exc:  # reported by the test, with the stream's name
                self.errors[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def ticks(self, name: str) -> list[int]:
        return [p.data["tick"] for p in self.parts[name] if p.event == "custom"]
