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

import httpx
import pytest
import yaml
from django.conf import settings

from hitl.core.models import ApiToken, HumanInterrupt
from tests.conftest import BIN, PYTHON, ROOT, Proc, free_port, spawn, wait_for

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
def compose_env(test_database_url, tmp_path) -> dict[str, str]:
    """The app services' environment from compose.yaml, pointed at this machine."""
    given = {
        "SECRET_KEY": "compose-smoke-" + uuid.uuid4().hex + uuid.uuid4().hex,
        "HITL_METRICS_TOKEN": METRICS_TOKEN,
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
    env.update(
        DATABASE_URL=test_database_url,
        REDIS_URL=settings.REDIS_URL,
        MEDIA_ROOT=str(tmp_path / "media"),
        HITL_VAR_DIR=str(tmp_path / "var"),
        # Fast beat so the test sees the periodic tasks arrive at the worker.
        HITL_EXPIRY_SWEEP_SECONDS="1",
        HITL_REAPER_SECONDS="1",
    )
    return env


METRICS_TOKEN = "compose-metrics-token"
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
    assert set(SERVICES) == {"postgres", "redis", "migrate", "web", "worker", "beat"}
    for name in ("postgres", "redis", "web", "worker"):
        assert SERVICES[name]["healthcheck"]["test"], name
    for name in ("web", "worker", "beat"):
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
        assert SERVICES[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert SERVICES["migrate"]["restart"] == "no"
    assert "pgdata:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "media:/data/media" in SERVICES["web"]["volumes"]
    assert "media:/data/media" in SERVICES["worker"]["volumes"]
    assert {"pgdata", "media"} <= set(COMPOSE["volumes"])
    # `--scale worker=N` needs a worker without fixed names or published ports, and its
    # concurrency from the environment rather than the command line.
    worker = SERVICES["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert not {"-c", "--concurrency"} & set(worker["command"])
    assert "HITL_RUNS_PER_WORKER" in worker["environment"]
    assert "runs" in worker["command"][worker["command"].index("-Q") + 1].split(",")
    assert worker["stop_signal"] == "SIGTERM"


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


def test_every_service_command_runs_here(compose_env, tmp_path, api_key, reviewers_group):
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
