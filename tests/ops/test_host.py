"""The "Running on a host (without Docker)" recipe of docs/operating.md cannot drift from the code: its
exact lines run here, against the local Postgres and Redis, with this test's database,
Redis db, port and directories substituted for the documented ones."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from hitl.core.models import ApiToken, Thread
from tests.conftest import BIN, PYTHON, ROOT, Proc, free_port, spawn, wait_for

pytestmark = pytest.mark.postgres

SECTION = "## Running on a host (without Docker)"


def recipe() -> tuple[dict[str, str], list[list[str]]]:
    """The recipe's exported environment and its commands, in order."""
    text = (ROOT / "docs" / "operating.md").read_text()
    section = text[text.index(SECTION) :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the host recipe has a sh block"
    env: dict[str, str] = {}
    commands: list[list[str]] = []
    for line in block.group(1).splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = value
        elif line.strip():
            commands.append(shlex.split(line))
    return env, commands


def _here(command: list[str], port: int) -> list[str]:
    program = {"python": PYTHON, "celery": str(BIN / "celery")}
    args = [program.get(command[0], command[0]), *command[1:]]
    if "-p" in args and command[:3] == ["python", "-m", "hitl.web"]:
        args[args.index("-p") + 1] = str(port)
    return args


def test_the_documented_host_recipe_runs_web_worker_and_beat(
    test_database_url, tmp_path, transactional_db
):
    # Its processes commit to the test database: flushed after, like every such test.
    documented, commands = recipe()
    assert set(documented) == {
        "DATABASE_URL",
        "REDIS_URL",
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "MEDIA_ROOT",
        "HITL_VAR_DIR",
    }
    names = [c[:3] if c[0] == "celery" else c[:2] for c in commands]
    assert names == [
        ["python", "manage.py"],
        ["python", "manage.py"],
        ["python", "-m"],
        ["celery", "-A", "hitl"],
        ["celery", "-A", "hitl"],
    ]
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
        **documented,
        # This machine's services and the test's own places.
        "DATABASE_URL": test_database_url,
        "REDIS_URL": settings.REDIS_URL,
        "MEDIA_ROOT": str(tmp_path / "media"),
        "HITL_VAR_DIR": str(tmp_path / "var"),
        "HITL_REVIEWER_PASSWORD": "host-recipe-pw-123",
    }
    port = free_port()
    migrate, create, web_cmd, worker_cmd, beat_cmd = (_here(c, port) for c in commands)
    assert migrate[2:] == ["migrate", "--noinput"]
    done = subprocess.run(migrate, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    made = subprocess.run(create, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-3000:]
    assert "Created reviewer alice in reviewers." in made.stdout
    token = re.search(r"API token: (hitl_\S+)", made.stdout).group(1)
    alice = get_user_model().objects.get(username="alice")
    assert alice.check_password("host-recipe-pw-123")
    assert list(alice.groups.values_list("name", flat=True)) == ["reviewers"]
    assert ApiToken.objects.filter(user=alice).count() == 1
    # Again: the same user, updated, not a second one.
    again = subprocess.run(
        [*create[:-1], "--group", "finance"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and "Updated reviewer alice in reviewers, finance." in again.stdout
    assert sorted(alice.groups.values_list("name", flat=True)) == ["finance", "reviewers"]

    procs: list[Proc] = []
    try:
        web = spawn(web_cmd, env, tmp_path / "web.log")
        procs.append(web)
        worker = spawn(worker_cmd, env, tmp_path / "worker.log")
        procs.append(worker)
        beat = spawn(beat_cmd, env, tmp_path / "beat.log")
        procs.append(beat)
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return web.popen.poll() is not None

        wait_for(healthy, 60, 0.2, "web /healthz")
        assert web.popen.poll() is None, web.output()[-3000:]
        wait_for(
            lambda: "HITL worker ready to take runs" in worker.output(), 90, 0.2, "worker ready"
        )
        ready = next(line for line in worker.output().splitlines() if "HITL worker ready" in line)
        assert " INFO " in ready and "runs" in ready and "approval" in ready
        wait_for(lambda: "beat: Starting" in beat.output(), 60, 0.2, "beat started")

        # The reviewer's token drives a run through web and worker, and answers it.
        from langgraph_sdk import get_sync_client

        sdk = get_sync_client(url=f"{base}/langgraph", api_key=token)
        try:
            thread = sdk.threads.create()
            paused = sdk.runs.wait(thread["thread_id"], "approval", input={"request": "host"})
            assert paused["__interrupt__"], worker.output()[-3000:]
            final = sdk.runs.wait(
                thread["thread_id"], "approval", command={"resume": {"type": "accept"}}
            )
            assert final["sent"] is True
        finally:
            sdk.close()
        assert Thread.objects.get(pk=thread["thread_id"]).status == "done"
        # The browser login works with the password the recipe's env gave.
        with httpx.Client(base_url=base) as browser:
            page = browser.get("/login/")
            csrf = browser.cookies["csrftoken"]
            logged = browser.post(
                "/login/",
                data={
                    "username": "alice",
                    "password": "host-recipe-pw-123",
                    "csrfmiddlewaretoken": csrf,
                },
                headers={"Referer": f"{base}/login/"},
            )
            assert page.status_code == 200 and logged.status_code == 302, logged.text[:500]
    finally:
        for proc in procs:
            proc.stop()
