"""Time travel in real headless Chromium: the thread page lists the checkpoint history,
and a requester forks a new run from a chosen step, optionally editing the state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitl.core import decisions, runs
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from hitl.core.runs import timetravel
from tests.api.client_graphs import CLIENT_GRAPHS, TARGETS
from tests.conftest import ROOT, wait_for
from tests.review import test_browser as base

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]
SHOTS = Path("/tmp/w16-shots")


@pytest.fixture
def client_graphs(monkeypatch):
    """The client test graphs, here and in the web and worker processes the test starts."""
    from hitl.core.registry import registry

    monkeypatch.setenv("HITL_EXTRA_GRAPHS", CLIENT_GRAPHS)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


def _state(thread: Thread) -> dict:
    return timetravel.thread_checkpoints(thread, limit=1)[0]["values"]


def test_a_requester_forks_a_thread_from_a_chosen_step_in_the_browser(
    client_graphs, asgi_server, worker_factory, browser_page, reviewer
):
    worker_factory("w1")
    run = runs.run_start(
        graph="typed_email", input={"request": "q3"}, user=reviewer, title="Q3 mail"
    )
    thread = run.thread
    wait_for(lambda: HumanInterrupt.objects.filter(thread=thread).exists(), what="a pause")
    row = HumanInterrupt.objects.get(thread=thread)
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    wait_for(lambda: Thread.objects.get(pk=thread.pk).status == "done", what="the end")
    steps = timetravel.thread_checkpoints(thread)
    (before_ask,) = [cp for cp in steps if cp["next"] == ["ask"]]
    runs_before = Run.objects.filter(thread=thread).count()

    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    rita.click("#history > summary")
    items = rita.query_selector_all("#history li.checkpoint")
    assert len(items) == len(steps)
    step = rita.locator(f'#history li[data-checkpoint="{before_ask["checkpoint_id"]}"]')
    assert "next: ask" in step.inner_text()

    # A state edit the graph's state schema refuses: a clear message, nothing started.
    for bad, says in (
        ('{"request": 5}', "does not match the state schema"),
        ('{"nope": 1}', "The state has no key 'nope'"),
        ('{"request": ', "not valid JSON"),
    ):
        step.locator("textarea").fill(bad)
        with rita.expect_navigation():
            step.locator("button.btn-fork").click()
        assert says in rita.inner_text(".flashes"), bad
        rita.click("#history > summary")
        step = rita.locator(f'#history li[data-checkpoint="{before_ask["checkpoint_id"]}"]')
    assert Run.objects.filter(thread=thread).count() == runs_before

    step.locator("textarea").fill('{"request": "q4, forked"}')
    with rita.expect_navigation():
        step.locator("button.btn-fork").click()
    assert "Forked from the chosen step with an edited state" in rita.inner_text(".flashes")
    # The fork runs from that step: "ask" again, so a new interrupt waits, on the edit.
    wait_for(
        lambda: HumanInterrupt.objects.filter(thread=thread, status="pending").exists(),
        what="the fork to ask again",
    )
    fork = Run.objects.filter(thread=thread).order_by("-created_at").first()
    assert fork.metadata == {
        "forked_from": before_ask["checkpoint_id"],
        "edited_keys": ["request"],
    }
    assert _state(thread)["request"] == "q4, forked"
    assert "sent" in before_ask["values"] or "sent" not in _state(thread)
    event = AuditEvent.objects.get(kind="thread.forked")
    assert event.actor == reviewer and event.run_id == fork.pk
    assert event.data["checkpoint_id"] == before_ask["checkpoint_id"]
    rita.reload()
    assert "fork, state edited" in rita.inner_text("#section-runs")
    rita.click("#history > summary")
    SHOTS.mkdir(exist_ok=True)
    rita.screenshot(path=str(SHOTS / "thread-history-fork.png"), full_page=True)
    assert rita.errors == []
