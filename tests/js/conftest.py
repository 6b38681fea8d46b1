"""The useStream page and the two layouts it runs against.

The page (tests/js/usestream/) is bundled by esbuild from var/node/js (installed by
scripts/ensure-js-clients) into a temp dir and served by a small HTTP server on another
origin, as a chat UI is: HITL answers it through CORS (HITL_API_CORS_ORIGINS).

Layouts, each started once per module:
- production: daphne + a Celery worker on PostgreSQL + Redis (restartable on its port);
- embedded: `make run`'s default, daphne alone on SQLite files, no Redis.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests import http_stand_ins
from tests.api.conftest import STACK_ENV, start_daphne
from tests.conftest import ROOT, Proc, start_celery_worker
from tests.js.usestream_graphs import GATE_DIR_ENV, USESTREAM_GRAPHS

NODE = ROOT / "var" / "node" / "js"
PAGE_SOURCE = Path(__file__).parent / "usestream"


@dataclass
class PageServer:
    origin: str
    gate_dir: Path


@pytest.fixture(scope="module")
def page_server(tmp_path_factory) -> Iterator[PageServer]:
    """The page bundled into a temp dir and served on an origin of its own."""
    esbuild = NODE / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        pytest.fail("The JS clients are missing: run scripts/ensure-js-clients.")
    out = tmp_path_factory.mktemp("usestream-page")
    shutil.copy(PAGE_SOURCE / "index.html", out / "index.html")
    subprocess.run(
        [
            str(esbuild),
            str(PAGE_SOURCE / "page.jsx"),
            "--bundle",
            f"--outfile={out / 'bundle.js'}",
            "--jsx=automatic",
            "--define:process.env.NODE_ENV='production'",
            "--log-level=warning",
        ],
        env={**os.environ, "NODE_PATH": str(NODE / "node_modules")},
        check=True,
    )

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http_stand_ins.serve(functools.partial(Quiet, directory=out))
    gate_dir = tmp_path_factory.mktemp("gates")
    try:
        yield PageServer(f"http://127.0.0.1:{server.server_address[1]}", gate_dir)
    finally:
        http_stand_ins.stop(server)


def _graph_env(page: PageServer) -> dict[str, str]:
    return {
        "HITL_EXTRA_GRAPHS": USESTREAM_GRAPHS,
        "HITL_API_CORS_ORIGINS": page.origin,
        GATE_DIR_ENV: str(page.gate_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


@dataclass
class Layout:
    """One way HITL is deployed, seen by a test: where the API is, who calls it, and
    what its database holds."""

    name: str
    base_url: str
    query: Callable[[str, list[Any]], list[tuple]]
    token: str = ""
    restart: Callable[[], None] | None = None

    def rows(self, sql: str, thread_id: str) -> list[tuple]:
        """Rows of `sql` (one %s: the thread's id), json columns decoded."""
        return [
            tuple(json.loads(v) if isinstance(v, str) and v[:1] in ("{", "[") else v for v in row)
            for row in self.query(sql, [thread_id])
        ]

    def interrupts(self, thread_id: str) -> list[tuple[str, str]]:
        return self.rows(
            "SELECT status, response_type FROM hitl_humaninterrupt WHERE thread_id = %s"
            " ORDER BY created_at",
            thread_id,
        )

    def runs(self, thread_id: str) -> list[tuple[str, str]]:
        return self.rows(
            "SELECT kind, status FROM hitl_run WHERE thread_id = %s ORDER BY created_at",
            thread_id,
        )

    def run_ids(self, thread_id: str) -> list[tuple[str, str]]:
        """(id, status) of the thread's runs, ids as the API spells them."""
        return [
            (str(uuid.UUID(str(run_id))), status)
            for run_id, status in self.rows(
                "SELECT id, status FROM hitl_run WHERE thread_id = %s ORDER BY created_at",
                thread_id,
            )
        ]

    def audit(self, thread_id: str) -> list[tuple[str, dict]]:
        return self.rows(
            "SELECT kind, data FROM hitl_auditevent WHERE thread_id = %s ORDER BY id", thread_id
        )


def _postgres_query(sql: str, params: list[Any]) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@pytest.fixture(scope="module")
def production(request, page_server, tmp_path_factory) -> Iterator[Layout]:
    database_url = request.getfixturevalue("test_database_url")
    env = {**STACK_ENV, **_graph_env(page_server)}
    log_dir = tmp_path_factory.mktemp("usestream-production")
    worker = start_celery_worker(
        database_url, log_dir / "celery.log", name="usestream", concurrency=2, **env
    )
    servers: list[Proc] = []
    server, base_url = start_daphne(database_url, log_dir / "daphne.log", **env)
    servers.append(server)

    def restart() -> None:
        """Stop daphne and start it again on the same port (and database)."""
        servers[-1].stop()
        port = int(base_url.rsplit(":", 1)[1])
        log = log_dir / f"daphne-{len(servers)}.log"
        servers.append(start_daphne(database_url, log, port=port, **env)[0])

    try:
        yield Layout("production", base_url, _postgres_query, restart=restart)
    finally:
        servers[-1].stop()
        worker.stop()


@pytest.fixture(scope="module")
def embedded(page_server, tmp_path_factory) -> Iterator[Layout]:
    import sqlite3

    from tests.test_embedded import _serve

    tmp = tmp_path_factory.mktemp("usestream-embedded")
    served = _serve(tmp, **_graph_env(page_server))
    base_url, token, var = next(served)

    def query(sql: str, params: list[Any]) -> list[tuple]:
        # Django keeps a UUID as 32 hex digits on SQLite.
        params = [uuid.UUID(p).hex if isinstance(p, str) else p for p in params]
        with sqlite3.connect(var / "hitl.sqlite3") as db:
            return db.execute(sql.replace("%s", "?"), params).fetchall()

    try:
        yield Layout("embedded", base_url, query, token=token)
    finally:
        next(served, None)


@pytest.fixture(scope="module", params=["production", "embedded"])
def layout(request) -> Layout:
    return request.getfixturevalue(request.param)


@pytest.fixture
def hitl(layout, request, monkeypatch, transactional_db) -> Layout:
    """The layout for this test; on PostgreSQL a flushed database and a fresh token."""
    # Playwright's sync API keeps an event loop on this thread; the ORM calls between
    # browser steps are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if layout.name == "embedded":
        return layout
    # Off this thread: saving a user tells its open sockets through async_to_sync, which
    # refuses a thread running an event loop (Playwright's).
    with ThreadPoolExecutor(1) as pool:
        token = pool.submit(_reviewer_token).result()
    return Layout(
        layout.name,
        layout.base_url,
        layout.query,
        token=token,
        restart=layout.restart,
    )


def _reviewer_token() -> str:
    """An API token of the reviewer persona (rita), made on the calling thread."""
    from django.conf import settings
    from django.contrib.auth.models import Group
    from django.db import connection

    from tests.api.conftest import token_for
    from tests.conftest import _make_user

    try:
        group = Group.objects.get_or_create(name=settings.HITL_DEFAULT_REVIEWER_GROUP)[0]
        return token_for(_make_user("rita", group))
    finally:
        connection.close()
