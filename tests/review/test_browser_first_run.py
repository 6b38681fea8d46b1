"""Issue 28: words that stay true, and a first run that explains itself (Chromium where a
reviewer meets it, plain checks for the README and docs/settings.md)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from django.core.management import call_command

from hitl.core import decisions
from tests.conftest import ROOT
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts

chromium = base.chromium
browser_page = base.browser_page


@pytest.mark.postgres
@pytest.mark.browser
def test_the_thread_page_says_what_is_so_when_it_is_read(
    asgi_server, browser_page, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (first, second) = open_interrupts(
        user=reviewer,
        values=[human_interrupt("send_email"), human_interrupt("archive")],
        title="Two asks",
    )
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    # The status agrees with the banner: paused, waiting for a decision.
    assert rita.inner_text("#section-status") == "paused"

    # Sam answers while rita only looks: nothing was sent from her page, and it says so.
    decisions.interrupt_resolve(
        interrupt_id=first.pk, user=second_reviewer, response_type="accept", grace=5
    )
    note = rita.wait_for_selector(f"#interrupt-{first.pk} .form-error").inner_text()
    assert note == "Already answered by sam."
    # The audit line says what the decision was, not a promise that runs out.
    rita.reload()
    audit = rita.inner_text("#section-audit")
    assert "with a 5 s undo window" in audit and "undo possible" not in audit
    assert rita.errors == []


@pytest.mark.postgres
@pytest.mark.browser
def test_the_demo_password_stays_and_open_browsers_stay_logged_in(
    asgi_server, chromium, monkeypatch, settings, tmp_path
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.VAR_DIR = tmp_path

    def setup() -> str:
        out = io.StringIO()
        call_command("demo_setup", "--username", "demo", stdout=out)
        return re.search(r"Demo reviewer: demo / (\S+)", out.getvalue()).group(1)

    password = setup()
    context = chromium.new_context(base_url=asgi_server)
    try:
        page = context.new_page()
        page.goto("/login/")
        page.fill("#id_username", "demo")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(asgi_server + "/")
        assert setup() == password  # `make run` again
        page.reload()
        assert page.url == asgi_server + "/", "the browser was logged out"
        assert page.get_attribute("body", "data-user") == "demo"
    finally:
        context.close()


def test_the_readme_starts_with_a_quick_tour_and_stays_inside_the_repository():
    readme = (ROOT / "README.md").read_text()
    # It opens with the two commands: start the app, run the tests.
    opening = readme.split("\n## ", 1)[0]
    assert re.search(r"```sh\nmake run .*\nmake test .*\n```", opening)
    headings = re.findall(r"^## (.+)$", readme, re.M)
    assert headings[0] == "Quick tour"
    tour = readme.split("## Quick tour", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^(\d)\. \*\*", tour, re.M) == ["1", "2", "3", "4", "5"]
    assert "make run PORT=" in tour
    # Nothing a clone does not have.
    assert not re.search(r"\]\(\.\./|`\.\./", readme)
    # The settings table (docs/settings.md) is one table: no paragraph breaks it.
    settings_page = (ROOT / "docs" / "settings.md").read_text()
    settings_part = re.split(
        r"^##+ ", settings_page.split("## Operational settings", 1)[1], maxsplit=1, flags=re.M
    )[0]
    rows = [line.startswith("|") for line in settings_part.splitlines()]
    first = rows.index(True)
    last = len(rows) - 1 - rows[::-1].index(True)
    assert all(rows[first : last + 1]), "a paragraph breaks the settings table"
    assert "`HITL_PORT`" in settings_part


def test_links_in_notifications_follow_the_port():
    env = {**os.environ, "HITL_PORT": "8123", "DJANGO_SETTINGS_MODULE": "hitl.settings"}
    env.pop("HITL_PUBLIC_URL", None)
    code = "import django; django.setup(); from django.conf import settings; print(settings.HITL_PUBLIC_URL)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "http://127.0.0.1:8123"
