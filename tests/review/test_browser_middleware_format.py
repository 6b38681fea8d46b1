"""The LangChain v1 demo agent (create_agent + HumanInTheLoopMiddleware) round-trips
through the reviewer app in real headless Chromium: each of the four decisions a
reviewer can give goes back to the graph as the middleware's own decision
(approve / edit / respond / reject), and the agent acts on it.

Same set-up as test_browser.py: daphne, a Celery worker, Debian's Chromium.
"""

from __future__ import annotations

import pytest

from hitl.core import runs
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.registry import registry
from hitl.core.runs.graphs import checkpointer
from tests.conftest import wait_for
from tests.review import test_browser as base

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def _last_words(thread: Thread) -> str:
    graph = registry.get("demo_v1", checkpointer())
    state = graph.get_state({"configurable": {"thread_id": str(thread.pk)}})
    return state.values["messages"][-1].content


@pytest.mark.parametrize(
    ("decision", "sent", "says"),
    [
        (
            "accept",
            {"type": "approve"},
            "Sent the Q4 2025 sales report to finance-team@example.com",
        ),
        ("edit", None, "Sent the Q4 2025 sales report to cfo@example.com"),
        (
            "response",
            {"type": "respond", "message": "Hold it until Monday."},
            "Hold it until Monday.",
        ),
        ("ignore", {"type": "reject"}, "The email was not sent: User rejected"),
    ],
)
def test_each_decision_goes_back_as_the_middleware_decision(
    asgi_server, celery_worker, browser_page, reviewer, decision, sent, says
):
    run = runs.run_start(
        graph="demo_v1",
        input={"messages": [{"role": "user", "content": "Send the Q4 report."}]},
        user=reviewer,
        title=f"v1 {decision}",
    )
    thread = Thread.objects.get(pk=run.thread_id)
    page = browser_page(asgi_server, "rita")
    page.goto(f"/threads/{thread.pk}/")
    page.wait_for_selector("#live-indicator[data-state=live]")
    card = page.wait_for_selector("article.interrupt")
    assert "send the sales report by email" in card.inner_text()
    for button in (".btn-accept", ".btn-edit", ".btn-respond", ".btn-ignore"):
        assert page.locator(f"article.interrupt {button}").count() == 1, button

    if decision == "edit":
        page.locator("article.interrupt input[data-key=to]").fill("cfo@example.com")
        page.click("article.interrupt button.btn-edit")
    elif decision == "response":
        page.fill("article.interrupt .respond textarea", "Hold it until Monday.")
        page.click("article.interrupt button.btn-respond")
    else:
        page.click(f"article.interrupt button.btn-{decision}")

    wait_for(
        lambda: Thread.objects.get(pk=thread.pk).status == "done", 60, 0.2, "the agent to finish"
    )
    row = HumanInterrupt.objects.get(thread=thread)
    assert (row.status, row.response_type) == ("resolved", decision)
    resume = Run.objects.get(thread=thread, kind="resume").input["resume"]
    (decisions,) = [v["decisions"] for v in resume.values()]
    if sent is None:
        assert decisions[0]["type"] == "edit"
        assert decisions[0]["edited_action"]["name"] == "send_email"
        assert decisions[0]["edited_action"]["args"]["to"] == "cfo@example.com"
    else:
        assert decisions == [sent]
    assert says in _last_words(thread)
    assert page.errors == []
