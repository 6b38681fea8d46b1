"""Runs on the thread page in real headless Chromium: a failure banner that arrives live,
retry and a new run."""

from __future__ import annotations

import pytest

from hitl.core import runs, services
from hitl.core.models import Run
from tests.review import test_browser as base
from tests.review.conftest import WORKER
from tests.review.test_browser import assert_not_reloaded, mark_no_reload
from tests.review.test_run_banner import TRACE

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_a_failed_run_shows_a_banner_live_and_can_be_retried(
    asgi_server, browser_page, admin_user, requester, settings
):
    settings.HITL_EXECUTOR = "manual"  # the retried run stays queued: no worker runs it
    run = services.run_start(graph="approval", input={"request": "q3"}, user=requester, title="F")
    runs.run_claim(run_id=run.pk, worker=WORKER)
    quinn = browser_page(asgi_server, "quinn")
    ada = browser_page(asgi_server, "ada")
    for page in (quinn, ada):
        page.goto(f"/threads/{run.thread_id}/")
        page.wait_for_selector("#live-indicator[data-state=live]")
        mark_no_reload(page)

    runs.run_fail(run_id=run.pk, worker=WORKER, error=TRACE)
    for page in (quinn, ada):
        banner = page.wait_for_selector("#run-failed")
        assert "RuntimeError: the tool exploded" in banner.inner_text()
        assert page.inner_text("#section-status") == "error"
        assert_not_reloaded(page)
    # The requester may start it again; the traceback is for staff only, folded.
    assert quinn.query_selector("#run-failed details") is None
    assert quinn.is_visible("#run-failed button:has-text('Start a new run')")
    assert not quinn.is_visible("#run-failed button:has-text('Retry')")
    details = ada.locator("#run-failed details.run-error")
    assert not ada.is_visible("#run-failed details pre")
    details.locator("summary").click()
    assert "graphs.py" in ada.inner_text("#run-failed details pre")

    ada.click("#run-failed button:has-text('Retry from the last step')")
    ada.wait_for_selector(".flash:has-text('Retrying the failed run')")
    assert ada.query_selector("#run-failed") is None
    assert Run.objects.get(pk=run.pk).status == "queued"
    quinn.wait_for_selector("#run-failed", state="detached")
    assert quinn.errors == [] and ada.errors == []
