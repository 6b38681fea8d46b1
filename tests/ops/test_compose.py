"""compose.yaml cannot drift from the code: each app service's command runs here, against
the local Postgres and Redis, with the environment compose.yaml and the Dockerfile give it.

No Docker engine runs on this machine; the service wiring (health checks, volumes, the
one-shot migration) is checked by reading the file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
import yaml
from django.conf import settings

from hitl.core.models import ApiToken, HumanInterrupt
from tests.conftest import BIN, PYTHON, ROOT, Proc, free_port, spawn, wait_for
from tests.object_store import S3Server, s3_server  # noqa: F401
from tests.ops.conftest import PgBouncer

pytestmark = pytest.mark.postgres

COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
_VAR = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: str, given: dict[str, str]) -> str:
    """Resolve ${VAR}, ${VAR:-default} and ${VAR:?error} the way compose does."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if given.get(name):
            return given[name]
        if op and op.endswith("?"):
            raise AssertionError(f"compose needs {name}: {arg}")
        return arg or ""

    return _VAR.sub(one, str(value))


def dockerfile_env() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                env[key] = value.replace("/app", str(ROOT))
    return env


def service_command(name: str, **replace: str) -> list[str]:
    command = list(SERVICES[name]["command"])
    for flag, value in replace.items():
        command[command.index(flag) + 1] = value
    return command


@pytest.fixture
def compose_env(test_database_url, tmp_path, s3_server) -> dict[str, str]:  # noqa: F811
    """The app services' environment from compose.yaml, pointed at this machine (an S3
    server in MinIO's place, with the bucket minio-init makes)."""
    given = {
        "SECRET_KEY": "compose-smoke-" + uuid.uuid4().hex + uuid.uuid4().hex,
        "HITL_METRICS_TOKEN": METRICS_TOKEN,
        "MINIO_ROOT_PASSWORD": MINIO_PASSWORD,
    }
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        "HOSTNAME": socket.gethostname(),
        **dockerfile_env(),
    }
    for key, value in SERVICES["web"]["environment"].items():
        env[key] = interpolate(value, given)
    # Where compose uses service names, this machine has localhost.
    bucket = interpolate(SERVICES["minio-init"]["command"][-1], given).removeprefix("minio/")
    if bucket not in [b["Name"] for b in s3_server.client.list_buckets()["Buckets"]]:
        s3_server.client.create_bucket(Bucket=bucket)
    env.update(
        DATABASE_URL=test_database_url,
        REDIS_URL=settings.REDIS_URL,
        HITL_FILES_S3_ENDPOINT_URL=s3_server.endpoint,
        MEDIA_ROOT=str(tmp_path / "media"),
        HITL_VAR_DIR=str(tmp_path / "var"),
        # Fast beat so the test sees the periodic tasks arrive at the worker.
        HITL_EXPIRY_SWEEP_SECONDS="1",
        HITL_REAPER_SECONDS="1",
    )
    return env


METRICS_TOKEN = "compose-metrics-token"
MINIO_PASSWORD = "compose-minio-" + uuid.uuid4().hex
# What the TLS-terminating proxy in front of web adds to every request it forwards.
VIA_PROXY = {"X-Forwarded-Proto": "https"}


def test_the_production_environment_passes_the_deploy_checks(compose_env):
    """`manage.py check --deploy` with compose's environment: no warning at all."""
    check = subprocess.run(
        [PYTHON, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=compose_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "System check identified no issues" in check.stdout, check.stdout


def test_the_production_environment_sends_secure_headers(compose_env):
    """The settings compose turns on, read by a fresh process, reach the responses."""
    script = (
        "import django, os; django.setup();"
        "from django.test import Client;"
        "c = Client();"
        "r = c.get('/login/', secure=True, HTTP_X_FORWARDED_PROTO='https');"
        "print(r.status_code);"
        "print(r['Strict-Transport-Security']);"
        "print(r['Content-Security-Policy']);"
        "print(r.cookies['csrftoken']['secure']);"
        "print(c.get('/login/').status_code, c.get('/login/')['Location']);"
        "print(c.get('/healthz').status_code)"
    )
    env = {**compose_env, "DJANGO_SETTINGS_MODULE": "hitl.settings"}
    env["ALLOWED_HOSTS"] = "testserver"
    out = subprocess.run(
        [PYTHON, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    status, hsts, csp, secure_cookie, redirect, health = out.stdout.splitlines()
    assert status == "200"
    assert hsts == "max-age=31536000; includeSubDomains; preload"
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert secure_cookie == "True"
    assert redirect == "301 https://testserver/login/"  # plain HTTP is sent to HTTPS
    assert health in ("200", "503")  # the health check is never redirected


def test_compose_wires_the_services_as_documented():
    assert set(SERVICES) == {
        "postgres",
        "pgbouncer",
        "redis",
        "minio",
        "minio-init",
        "migrate",
        "web",
        "worker",
        "beat",
    }
    for name in ("postgres", "pgbouncer", "redis", "minio", "web", "worker"):
        assert SERVICES[name]["healthcheck"]["test"], name
    for name in ("web", "worker", "beat"):
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
        assert SERVICES[name]["depends_on"]["minio-init"] == {
            "condition": "service_completed_successfully"
        }
        assert SERVICES[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
        # No shared folder: the thread files are in the bucket, reachable from any host.
        assert not any("/data/media" in v for v in SERVICES[name].get("volumes", [])), name
    assert SERVICES["migrate"]["restart"] == "no"
    assert "pgdata:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "miniodata:/data" in SERVICES["minio"]["volumes"]
    assert {"pgdata", "miniodata"} <= set(COMPOSE["volumes"]) and "media" not in COMPOSE["volumes"]
    # The bucket minio-init makes, with MinIO's credentials, is the one the app uses.
    given = {"MINIO_ROOT_PASSWORD": "pw", "SECRET_KEY": "k"}
    app = {k: interpolate(v, given) for k, v in SERVICES["web"]["environment"].items()}
    minio = {k: interpolate(v, given) for k, v in SERVICES["minio"]["environment"].items()}
    init = SERVICES["minio-init"]
    assert interpolate(init["command"][-1], given) == f"minio/{app['HITL_FILES_S3_BUCKET']}"
    assert interpolate(init["environment"]["MC_HOST_minio"], given) == (
        f"http://{minio['MINIO_ROOT_USER']}:{minio['MINIO_ROOT_PASSWORD']}@minio:9000"
    )
    assert app["HITL_FILES_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert (app["HITL_FILES_S3_ACCESS_KEY_ID"], app["HITL_FILES_S3_SECRET_ACCESS_KEY"]) == (
        minio["MINIO_ROOT_USER"],
        minio["MINIO_ROOT_PASSWORD"],
    )
    assert init["depends_on"]["minio"] == {"condition": "service_healthy"}
    assert "ports" not in SERVICES["minio"]  # only web and workers talk to it
    # `--scale worker=N` needs a worker without fixed names or published ports, and its
    # concurrency from the environment rather than the command line.
    worker = SERVICES["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert not {"-c", "--concurrency"} & set(worker["command"])
    assert "HITL_RUNS_PER_WORKER" in worker["environment"]
    assert "runs" in worker["command"][worker["command"].index("-Q") + 1].split(",")
    assert worker["stop_signal"] == "SIGTERM"


def test_the_app_reaches_postgres_through_pgbouncer(test_database_url, tmp_path):
    """web, worker and beat go through compose's PgBouncer in transaction mode, with the
    switch that keeps session state out of it; migrate goes straight to Postgres. The
    config compose hands PgBouncer runs on the host's Debian pgbouncer, pointed at the
    test database (the address, the port and, as the local server trusts, the auth)."""
    for name in ("web", "worker", "beat"):
        env = SERVICES[name]["environment"]
        assert "@pgbouncer:6432/hitl" in env["DATABASE_URL"], name
        assert env["HITL_DATABASE_POOLER"] == "pgbouncer", name
        assert SERVICES[name]["depends_on"]["pgbouncer"] == {"condition": "service_healthy"}
    migrate = SERVICES["migrate"]["environment"]
    assert "@postgres:5432/hitl" in migrate["DATABASE_URL"]
    assert not migrate["HITL_DATABASE_POOLER"]
    assert SERVICES["pgbouncer"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert SERVICES["pgbouncer"]["healthcheck"]["test"]

    ini = interpolate(COMPOSE["configs"]["pgbouncer-ini"]["content"], {})
    assert "pool_mode = transaction" in ini
    assert "default_pool_size = 20" in ini and "max_db_connections = 20" in ini
    users = interpolate(COMPOSE["configs"]["pgbouncer-users"]["content"], {})
    assert users.strip() == '"hitl" "hitl"'
    server = urlsplit(test_database_url)
    bouncer = PgBouncer(tmp_path, test_database_url)
    (tmp_path / "users.txt").write_text(f'"{server.username}" "{server.password or ""}"\n')
    local = {
        "hitl = host=postgres port=5432 dbname=hitl": (
            f"hitl = host={server.hostname} port={server.port or 5432} dbname={server.path[1:]}"
        ),
        "listen_addr = 0.0.0.0": "listen_addr = 127.0.0.1",
        "listen_port = 6432": f"listen_port = {bouncer.port}",
        "auth_type = scram-sha-256": "auth_type = trust",
        "/etc/pgbouncer/users.txt": str(tmp_path / "users.txt"),
    }
    for compose_line, here in local.items():
        assert compose_line in ini
        ini = ini.replace(compose_line, here)
    bouncer.start(ini)
    try:
        url = f"postgres://{server.username}@127.0.0.1:{bouncer.port}/hitl"
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            assert conn.execute("SELECT current_database()").fetchone()[0] == server.path[1:]
    finally:
        bouncer.stop()


def run_healthcheck(name: str, env: dict[str, str], **replace: str) -> subprocess.CompletedProcess:
    kind, *test = SERVICES[name]["healthcheck"]["test"]
    args = ["sh", "-c", test[0].replace("$$", "$")] if kind == "CMD-SHELL" else test
    args = [re.sub(r"127\.0\.0\.1:8000", replace.get("address", "127.0.0.1:8000"), a) for a in args]
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def start_service(name: str, env: dict[str, str], log: Path, **replace: str) -> Proc:
    return spawn(service_command(name, **replace), env, log)


@pytest.fixture
def api_key(transactional_db, requester) -> str:
    return ApiToken.issue(user=requester, name="compose")[1]


def test_every_service_command_runs_here(
    compose_env,
    tmp_path,
    api_key,
    reviewers_group,
    s3_server,  # noqa: F811
):
    migrate = subprocess.run(
        SERVICES["migrate"]["command"],
        env=compose_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]

    port = free_port()
    procs: list[Proc] = []
    try:
        web = start_service("web", compose_env, tmp_path / "web.log", **{"-p": str(port)})
        procs.append(web)
        worker = start_service("worker", compose_env, tmp_path / "worker.log")
        procs.append(worker)
        beat = start_service("beat", compose_env, tmp_path / "beat.log")
        procs.append(beat)
        base = f"http://127.0.0.1:{port}"

        def healthy():
            try:
                return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return web.popen.poll() is not None

        wait_for(healthy, 60, 0.2, "web /healthz")
        assert web.popen.poll() is None, web.output()[-3000:]
        assert httpx.get(f"{base}/healthz").json()["checks"] == {
            "database": "ok",
            "redis": "ok",
            "checkpointer": "ok",
        }
        check = run_healthcheck("web", compose_env, address=f"127.0.0.1:{port}")
        assert check.returncode == 0, check.stderr

        wait_for(lambda: "ready." in worker.output(), 60, 0.2, "worker ready")
        wait_for(lambda: "beat: Starting" in beat.output(), 60, 0.2, "beat started")
        # Beat's schedule reaches the worker through the broker.
        wait_for(
            lambda: (
                "hitl.maintenance.reap_runs" in worker.output()
                and "hitl.maintenance.expire_interrupts" in worker.output()
            ),
            30,
            0.2,
            "periodic maintenance tasks to run on the worker",
        )
        check = run_healthcheck("worker", compose_env)
        assert check.returncode == 0, check.stdout + check.stderr

        assert httpx.get(f"{base}/metrics").status_code == 401
        metrics = httpx.get(
            f"{base}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        ).text
        assert (
            f'hitl_worker_heartbeat_timestamp_seconds{{worker="celery@{socket.gethostname()}"}}'
            in metrics
        )

        # One request through web and worker: its ids appear in the worker's JSON logs.
        request_id = "smoke-" + uuid.uuid4().hex[:8]
        started = httpx.post(
            f"{base}/api/v1/threads",
            json={"graph": "approval", "input": {"request": "compose"}},
            headers={
                "Authorization": f"Bearer {api_key}",
                "X-Request-ID": request_id,
                **VIA_PROXY,
            },
        )
        assert started.status_code == 201, started.text
        assert started.headers["X-Request-ID"] == request_id
        thread_id = started.json()["thread_id"]
        wait_for(
            lambda: HumanInterrupt.objects.filter(thread_id=thread_id).exists(),
            30,
            what="the worker to pause the run",
        )

        def worker_lines_for_request():
            lines = []
            for raw in worker.output().splitlines():
                if raw.startswith("{") and request_id in raw:
                    lines.append(json.loads(raw))
            return lines

        lines = wait_for(worker_lines_for_request, 10, what="worker log lines with the request id")
        assert all(line["thread_id"] == thread_id for line in lines)
        assert any(line.get("run_id") and "interrupted" in line["message"] for line in lines)

        # A thread file goes to the bucket (where MinIO would be) and back through web.
        auth = {"Authorization": f"Bearer {api_key}", **VIA_PROXY}
        files_url = f"{base}/api/v1/threads/{thread_id}/files"
        stored = httpx.post(files_url, files={"file": ("notes.txt", b"compose")}, headers=auth)
        assert stored.status_code == 201, stored.text
        key = f"threads/{thread_id}/uploads/notes.txt"
        bucket = compose_env["HITL_FILES_S3_BUCKET"]
        assert s3_server.client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"compose"
        back = httpx.get(files_url, params={"path": stored.json()["path"]}, headers=auth)
        assert back.status_code == 200 and back.content == b"compose"
        assert not (Path(compose_env["MEDIA_ROOT"]) / "threads").exists()
    finally:
        for proc in reversed(procs):
            proc.stop()
    # SIGTERM: a warm shutdown, not a crash.
    assert worker.popen.returncode == 0, worker.output()[-3000:]


# --- the login lockout behind compose's web command (issue 27, item 7) ----------------


def test_web_never_believes_forwarded_headers_from_any_peer():
    """daphne's --proxy-headers takes the left-most X-Forwarded-For entry from anyone."""
    assert "--proxy-headers" not in SERVICES["web"]["command"]
    assert "--proxy-headers" not in (ROOT / "Dockerfile").read_text()
    assert "HITL_TRUSTED_PROXIES" in SERVICES["web"]["environment"]


class LoginClient:
    """Logs in to a server started from compose's web command, over the TLS proxy."""

    def __init__(self, base: str):
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=30)

    def attempt(self, username: str, password: str, forwarded_for: str) -> httpx.Response:
        headers = {**VIA_PROXY, "X-Forwarded-For": forwarded_for}
        page = self.http.get("/login/", headers=headers)
        assert page.status_code == 200, page.text[:500]
        token = page.cookies["csrftoken"]  # Secure: sent back by hand over plain http
        return self.http.post(
            "/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={
                **headers,
                "Cookie": f"csrftoken={token}",
                "Origin": "https://" + self.base.removeprefix("http://"),
            },
        )


def locked_after_failures(base: str, username: str, forwarded_for) -> list[int]:
    """Wrong passwords up to the limit, then the right one; each with its own header."""
    client = LoginClient(base)
    limit = settings.AXES_FAILURE_LIMIT
    answers = [
        client.attempt(username, "wrong", forwarded_for(i)).status_code for i in range(limit)
    ]
    right = client.attempt(username, "pw-" + username, forwarded_for(limit))
    return [*answers, right.status_code]


@pytest.mark.parametrize(
    ("trusted", "forwarded_for"),
    [
        # Published directly, no proxy trusted: every X-Forwarded-For is the client's own.
        ("", lambda i: f"203.0.113.{i + 1}"),
        # An appending proxy on this host, not configured as trusted.
        ("", lambda i: f"203.0.113.{i + 1}, 127.0.0.1"),
        # The appending proxy (this test, at 127.0.0.1) trusted: the client is the entry
        # it appended (198.51.100.7), whatever the client wrote to its left.
        ("127.0.0.1", lambda i: f"203.0.113.{i + 1}, 198.51.100.7"),
        # Two trusted hops (a CDN network and the local proxy) in front of the client.
        ("127.0.0.1,10.0.0.0/8", lambda i: f"203.0.113.{i + 1}, 198.51.100.7, 10.1.2.3"),
    ],
    ids=["direct", "untrusted-appending-proxy", "trusted-appending-proxy", "two-trusted-hops"],
)
def test_a_spoofed_forwarded_for_does_not_lift_the_login_lockout(
    compose_env, tmp_path, transactional_db, reviewers_group, trusted, forwarded_for
):
    from tests.conftest import _make_user

    _make_user("lena", reviewers_group)
    env = {**compose_env, "HITL_TRUSTED_PROXIES": trusted}
    port = free_port()
    web = start_service("web", env, tmp_path / "web.log", **{"-p": str(port)})
    try:
        base = f"http://127.0.0.1:{port}"

        def up():
            try:
                return httpx.get(f"{base}/healthz", timeout=5).status_code in (200, 503)
            except httpx.HTTPError:
                return web.popen.poll() is not None

        wait_for(up, 60, 0.2, "web /healthz")
        assert web.popen.poll() is None, web.output()[-3000:]
        answers = locked_after_failures(base, "lena", forwarded_for)
    finally:
        web.stop()
    limit = settings.AXES_FAILURE_LIMIT
    assert answers[: limit - 1] == [200] * (limit - 1), answers
    # Locked at the limit, and the right password with a fresh header is still refused.
    assert answers[limit - 1 :] == [429, 429], answers
    from axes.models import AccessAttempt

    counted = set(
        AccessAttempt.objects.filter(username="lena").values_list("ip_address", flat=True)
    )
    assert counted == {"198.51.100.7" if trusted else "127.0.0.1"}
