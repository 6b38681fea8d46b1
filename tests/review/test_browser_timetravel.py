"""Time travel in real headless Chromium: the thread page loads the checkpoint history
when it is opened, a page at a time, each step saying what happened; a requester forks
a new run from a chosen step, optionally editing the state; results and files say which
branch they belong to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hitl.core import decisions, runs
from hitl.core.history import timetravel
from hitl.core.models import AuditEvent, HumanInterrupt, Run, Thread
from tests.api.client_graphs import CLIENT_GRAPHS, TARGETS
from tests.conftest import ROOT, wait_for
from tests.review import test_browser as base
from tests.review.conftest import checkpoints
from tests.review.test_browser_axe import axe_page, axe_violations

chromium = base.chromium
browser_page = base.browser_page
axe_page = axe_page  # a fixture, used by name

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
    return checkpoints(thread, limit=1)[0]["values"]


def _open_history(page) -> None:
    """Open the history section and wait for its first page of steps."""
    page.click("#history > summary")
    page.wait_for_selector("#history li.checkpoint")


def _open_step(page, checkpoint_id: str):
    """Open one step's collapsed state editor (paging back to it), its state loaded."""
    step = page.locator(f'#history li[data-checkpoint="{checkpoint_id}"]')
    while not step.count():
        shown = page.locator("#history li.checkpoint").count()
        page.click("#history a[data-more]")
        wait_for(lambda n=shown: page.locator("#history li.checkpoint").count() > n, what="a page")
    step.locator("details.checkpoint-state > summary").click()
    step.locator("pre.state-json:not([data-state-pending])").wait_for()
    return step


def _answer(thread: Thread, user, answer: str = "Q3 2025") -> None:
    for row in HumanInterrupt.objects.filter(thread=thread, status="pending"):
        kind = "response" if row.action == "ask_clarification" else "accept"
        decisions.interrupt_resolve(
            interrupt_id=row.pk,
            user=user,
            response_type=kind,
            args=answer if kind == "response" else None,
        )


def _demo_done(user) -> Thread:
    """The demo story run to its end on the worker: the quarter answered, the mail accepted."""
    thread = runs.run_start(graph="demo", input={}, user=user, title="Q3 sales report").thread
    for what in ("the quarter question", "the mail approval"):
        wait_for(
            lambda: HumanInterrupt.objects.filter(thread=thread, status="pending").exists(),
            timeout=60,
            what=what,
        )
        _answer(thread, user)
    wait_for(lambda: Thread.objects.get(pk=thread.pk).status == "done", timeout=60, what="the end")
    return Thread.objects.get(pk=thread.pk)


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
    steps = checkpoints(thread)
    (before_ask,) = [cp for cp in steps if cp["next"] == ["ask"]]
    runs_before = Run.objects.filter(thread=thread).count()

    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    _open_history(rita)
    items = rita.query_selector_all("#history li.checkpoint")
    assert len(items) == len(steps)
    step = rita.locator(f'#history li[data-checkpoint="{before_ask["checkpoint_id"]}"]')
    assert "ask asked to run send_email" in step.inner_text()
    assert "accepted by rita" in step.inner_text()
    step = _open_step(rita, before_ask["checkpoint_id"])

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
        _open_history(rita)
        step = _open_step(rita, before_ask["checkpoint_id"])
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
        "forked_step": before_ask["step"],
        "edited_keys": ["request"],
    }
    assert _state(thread)["request"] == "q4, forked"
    assert "sent" in before_ask["values"] or "sent" not in _state(thread)
    event = AuditEvent.objects.get(kind="thread.forked")
    assert event.actor == reviewer and event.run_id == fork.pk
    assert event.data["checkpoint_id"] == before_ask["checkpoint_id"]
    rita.reload()
    badge = f"fork 1, from step {before_ask['step']}, state edited"
    assert badge in rita.inner_text("#section-runs")
    _open_history(rita)
    edited = rita.locator("#history li.step-edit")
    assert "State edited by rita: request" in edited.inner_text()
    assert "fork 1" in edited.inner_text()
    assert rita.errors == []


def test_history_steps_say_what_ran_and_who_decided_and_load_a_page_at_a_time(
    asgi_server, worker_factory, axe_page, reviewer
):
    worker_factory("w1")
    thread = _demo_done(reviewer)
    rita = axe_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    # Nothing of the history is in the page until it is opened.
    assert rita.locator("#history li.checkpoint").count() == 0
    assert "finance-team@example.com" not in rita.inner_html("#history")
    _open_history(rita)
    steps = rita.locator("#history li.checkpoint")
    assert steps.count() == 10
    text = rita.inner_text("#history")
    # Which node ran, which tool call with its args, which decision and by whom.
    assert (
        "tools ran send_email (to: finance-team@example.com, subject: Sales report Q3 2025" in text
    )
    sent = rita.locator("#history li.checkpoint", has_text="tools ran send_email")
    assert "accepted by rita" in sent.inner_text()
    assert "agent proposed send_email" in text
    assert "End" in steps.first.inner_text() and "the latest state" in steps.first.inner_text()
    assert "Step 14 · loop" not in text and "next: tools" not in text
    # Editors are collapsed: no state, no fork button in sight until a step is opened.
    assert rita.locator("#history details.checkpoint-state[open]").count() == 0
    assert not rita.locator("#history button.btn-fork").first.is_visible()
    assert not rita.locator("#history pre.state-json").first.is_visible()
    # Earlier steps come a page at a time, down to the start.
    rita.click("#history a[data-more]")
    rita.wait_for_selector("#history li.checkpoint >> nth=10")
    while rita.locator("#history a[data-more]").count():
        count = steps.count()
        rita.click("#history a[data-more]")
        wait_for(lambda n=count: steps.count() > n, what="an earlier page")
    assert steps.count() == len(checkpoints(thread))
    asked = rita.locator("#history li.checkpoint", has_text="tools ran ask_clarification")
    assert "answered by rita" in asked.inner_text()
    assert "Run started" in steps.last.inner_text()
    # A step's state loads when its editor opens; the fork button is inside.
    first = steps.first.get_attribute("data-checkpoint")
    step = _open_step(rita, first)
    assert '"final_result"' in step.locator("pre.state-json").inner_text()
    assert step.locator("button.btn-fork").is_visible()
    assert axe_violations(rita) == []
    # On a phone the steps wrap: nothing wider than the screen.
    rita.set_viewport_size({"width": 390, "height": 844})
    assert rita.evaluate("document.documentElement.scrollWidth") <= 390
    assert rita.errors == []


def test_a_running_fork_hides_the_old_result_and_files_say_their_branch(
    asgi_server, worker_factory, browser_page, reviewer
):
    worker_factory("w1")
    thread = _demo_done(reviewer)
    old_files = set(thread.artifacts.values_list("pk", flat=True))
    (quarter,) = [cp for cp in checkpoints(thread) if cp["next"] == ["tools"] and cp["step"] == 2]
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    assert "Sent the Q3 2025 sales report" in rita.inner_text("#final-result")
    rita.wait_for_selector("#live-indicator[data-state=live]")

    # Fork from the quarter question (the fork button is covered above): it asks again.
    timetravel.thread_fork(thread=thread, user=reviewer, checkpoint_id=quarter["checkpoint_id"])
    rita.wait_for_selector("article.interrupt button.option:has-text('Q4 2025')")
    # The original branch's result is not this thread's result any more (live).
    rita.wait_for_selector("#final-result", state="detached")
    old = rita.locator("#old-result")
    assert "Result of the original branch" in old.text_content()
    assert "fork 1 is waiting for a decision" in old.text_content()
    assert not old.locator("dl.kv").is_visible()  # folded away
    # Its files are kept apart, labelled with their branch.
    files = rita.inner_text("#section-artifacts")
    assert "None yet on this branch" in files
    rita.click("#other-branch-files > summary")
    other = rita.locator("#other-branch-files figure.artifact")
    assert other.count() == len(old_files)
    assert other.locator(".chip.branch").all_inner_texts() == ["original"] * len(old_files)

    # The fork goes on with another quarter: its files are its own, the old ones apart.
    rita.locator("article.interrupt button.option:has-text('Q4 2025')").click()
    rita.wait_for_selector("article.interrupt input[data-key=to]")
    rita.wait_for_selector(
        "#section-artifacts .card > .artifacts > figure[data-name='sales-q4-2025.csv']"
    )
    current = rita.locator("#section-artifacts .card > .artifacts > figure.artifact")
    assert set(current.locator(".chip.branch").all_inner_texts()) == {"fork 1"}
    assert "sales-q3-2025.csv" not in " ".join(current.all_inner_texts())
    assert "sales-q3-2025.csv" in rita.text_content("#other-branch-files")
    assert rita.locator("#final-result").count() == 0

    # Accepted: the fork's own result is the final result, named by its branch.
    rita.click("article.interrupt button.btn-accept")
    result = rita.wait_for_selector("#final-result:has-text('Q4 2025')")
    assert result.query_selector(".chip.branch").inner_text() == "fork 1"
    assert rita.locator("#old-result").count() == 0  # one result: the current branch's
    SHOTS.mkdir(exist_ok=True)
    rita.screenshot(path=str(SHOTS / "thread-fork-branches.png"), full_page=True)
    assert rita.errors == []


def test_history_shows_the_args_an_edited_tool_ran_with_and_what_the_reviewer_changed(
    asgi_server, worker_factory, browser_page, reviewer
):
    worker_factory("w1")
    thread = runs.run_start(graph="demo", input={}, user=reviewer, title="Q3 sales report").thread
    wait_for(lambda: thread.interrupts.filter(status="pending").exists(), 60, what="the quarter")
    _answer(thread, reviewer)
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    to = rita.locator("article.interrupt input[data-key=to]")
    to.fill("cfo@example.com")
    with rita.expect_navigation():
        rita.click("article.interrupt button.btn-edit")
    wait_for(lambda: Thread.objects.get(pk=thread.pk).status == "done", 60, what="the end")
    rita.reload()
    _open_history(rita)
    sent = rita.locator("#history li.checkpoint", has_text="tools ran send_email")
    text = " ".join(sent.inner_text().split())
    assert "tools ran send_email (to: cfo@example.com, subject: Sales report Q3 2025" in text
    assert "edited by rita: to finance-team@example.com → cfo@example.com" in text
    assert "returned “Email to cfo@example.com" in text
    for width in (390, 1366):
        rita.set_viewport_size({"width": width, "height": 900})
        sent.scroll_into_view_if_needed()
        base.shot(rita, f"history-edited-call-{width}")
    assert rita.errors == []
