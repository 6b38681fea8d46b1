"""Runs on the thread page in real headless Chromium: a failure banner that arrives live,
retry and a new run."""

from __future__ import annotations

import pytest

from hitl.core import runs
from hitl.core.models import HumanInterrupt, Run
from hitl.core.worker import lease
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.conftest import WORKER
from tests.review.test_browser import (
    assert_not_reloaded,
    hold_thread_pages_next_read,
    mark_no_reload,
    open_counting_resyncs,
)
from tests.review.test_run_banner import TRACE

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_a_failed_run_shows_a_banner_live_and_can_be_retried(
    asgi_server, browser_page, admin_user, requester, settings
):
    settings.HITL_EXECUTOR = "manual"  # the retried run stays queued: no worker runs it
    run = runs.run_start(graph="approval", input={"request": "q3"}, user=requester, title="F")
    lease.run_lease_take(run_id=run.pk, worker=WORKER)
    quinn = browser_page(asgi_server, "quinn")
    ada = browser_page(asgi_server, "ada")
    for page in (quinn, ada):
        page.goto(f"/threads/{run.thread_id}/")
        page.wait_for_selector("#live-indicator[data-state=live]")
        mark_no_reload(page)

    lease.run_fail(run_id=run.pk, worker=WORKER, error=TRACE)
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


def test_a_read_from_before_a_failure_does_not_take_its_banner_away(
    asgi_server, browser_page, requester, settings
):
    """The page's read of its sections went out while the run was running and answered
    after the socket had brought the failure: the banner and the status "error" stay."""
    settings.HITL_EXECUTOR = "manual"
    run = runs.run_start(graph="approval", input={"request": "q3"}, user=requester, title="F")
    lease.run_lease_take(run_id=run.pk, worker=WORKER)
    page = browser_page(asgi_server, "quinn")
    open_counting_resyncs(page, f"/threads/{run.thread_id}/")

    route, stale = hold_thread_pages_next_read(page)
    assert stale.json()["status"] == "busy"
    lease.run_fail(run_id=run.pk, worker=WORKER, error=TRACE)
    page.wait_for_selector("#run-failed")
    route.fulfill(response=stale)
    page.wait_for_function("() => window.__resynced === 2")
    assert page.is_visible("#run-failed")
    assert page.inner_text("#section-status") == "error"
    assert page.get_attribute("#thread", "data-status") == "error"
    assert page.errors == []


def test_parallel_items_count_down_answer_alike_and_stay_to_show_the_resume(
    asgi_server, celery_worker, browser_page, reviewer
):
    elsewhere = runs.run_start(graph="approval", input={"request": "q3"}, user=reviewer)
    run = runs.run_start(
        graph="parallel_approval",
        input={"files": ["a.txt", "b.txt", "c.txt"]},
        user=reviewer,
        title="Clean up",
    )
    page = browser_page(asgi_server, "rita")
    watcher = browser_page(asgi_server, "rita")
    for p in (page, watcher):
        p.goto(f"/threads/{run.thread_id}/")
        p.wait_for_selector("#live-indicator[data-state=live]")
    wait_for(lambda: page.locator("article.interrupt").count() == 3, what="three cards", timeout=30)
    wait_for(lambda: "0 of 3 answered" in watcher.inner_text("#section-batch"), what="count")
    mark_no_reload(watcher)
    wait_for(
        lambda: HumanInterrupt.objects.filter(thread_id=elsewhere.thread_id).exists(),
        what="the other thread's item",
    )

    page.reload()
    first = page.locator("article.interrupt").first
    first.locator("button.btn-accept").click()
    page.wait_for_selector(".flash:has-text('(item 1 of 3) on')")
    # The toast names the item and its thread.
    assert "Approved: delete file (item 1 of 3) on “" in page.inner_text(".flashes")
    wait_for(lambda: "1 of 3 answered" in watcher.inner_text("#section-batch"), what="live count")
    assert "(2 left)" in watcher.inner_text("#section-batch")

    page.click("#batch button:has-text('Ignore all 2')")
    page.wait_for_selector(".flash:has-text('Ignored 2')")
    assert f"/threads/{run.thread_id}/" in page.url  # stayed on the thread
    # The resume shows on both pages, with the next item one click away.
    for p in (page, watcher):
        p.wait_for_selector("#batch .status-success", timeout=30_000)
        assert "3 of 3 answered" in p.inner_text("#batch")
    assert_not_reloaded(watcher)
    page.click("#batch a:has-text('Next item')")
    page.wait_for_url(f"**/threads/{elsewhere.thread_id}/#interrupt-*")
    assert page.errors == [] and watcher.errors == []


def test_a_slow_run_shows_working_elapsed_time_and_the_current_node(
    asgi_server, worker_factory, browser_page, reviewer
):
    worker_factory("slow", HITL_SCRIPTED_DELAY="3")  # every model call takes 3 s
    page = browser_page(asgi_server, "rita")
    page.goto("/threads/new/")
    page.select_option("#id_graph", "demo")
    page.fill("#id_title", "Slow report")
    page.click("button.primary")
    page.wait_for_url("**/threads/*/")
    page.wait_for_selector("#live-indicator[data-state=live]")
    # The first model call: working, with a clock.
    page.wait_for_selector("#run-progress:not([hidden])")
    wait_for(
        lambda: page.inner_text("#run-progress .elapsed") in ("1 s", "2 s", "3 s"), what="clock"
    )
    page.locator("article.interrupt button.option:has-text('Q3 2025')").click(timeout=30_000)
    page.wait_for_selector(".flash:has-text('Answer sent')")
    mark_no_reload(page)

    # The resumed run: the page names the node the model works in while it waits.
    page.wait_for_selector("#run-progress:not([hidden])")
    wait_for(
        lambda: page.inner_text("#run-progress .doing") == "in agent",
        what="the current node",
        timeout=15,
    )
    # The model's replies stream in a word at a time: a half-written sentence shows.
    wait_for(
        lambda: "Now a" in (text := page.inner_text("#live-output")) and "region." not in text,
        what="a partly streamed reply",
        timeout=20,
        interval=0.02,
    )
    seen = {page.inner_text("#run-progress .elapsed")}
    wait_for(
        lambda: seen.add(page.inner_text("#run-progress .elapsed")) or len(seen) >= 2,
        what="the clock to tick",
        timeout=10,
    )
    # Tool calls are named as they start; the approval arrives and the indicator goes.
    page.wait_for_selector("article.interrupt input[data-key=to]", timeout=60_000)
    page.wait_for_selector("#run-progress", state="hidden")
    assert_not_reloaded(page)
    assert page.errors == []


def test_the_error_tab_and_the_page_of_a_failed_run_say_its_error_once(
    asgi_server, browser_page, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    run = runs.run_start(graph="approval", input={"request": "q3"}, user=requester, title="F")
    lease.run_lease_take(run_id=run.pk, worker=WORKER)
    lease.run_fail(run_id=run.pk, worker=WORKER, error=TRACE)
    quinn = browser_page(asgi_server, "quinn")
    quinn.goto("/?tab=error")
    row = quinn.locator(f"#row-{run.thread_id}")
    assert "RuntimeError: the tool exploded" in row.inner_text()
    assert row.locator(".chip.group").inner_text() == "reviewers"
    for width in (390, 1366):
        quinn.set_viewport_size({"width": width, "height": 800})
        base.shot(quinn, f"error-tab-{width}")
    quinn.click(f"#row-{run.thread_id} a.title")
    quinn.wait_for_selector("#run-failed")
    assert quinn.inner_text("body").count("the tool exploded") == 1
    quinn.click("#section-runs a[href='#run-failed']")
    for width in (390, 1366):
        quinn.set_viewport_size({"width": width, "height": 900})
        base.shot(quinn, f"failed-run-page-{width}")
    assert quinn.errors == []
