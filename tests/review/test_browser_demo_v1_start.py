"""`demo_v1` from the New-thread page in real Chromium: its description is rendered
Markdown, and it starts with no message, as `demo` does, and pauses on its e-mail."""

from __future__ import annotations

import pytest

from hitl.core.models import Run
from tests.review import test_browser as base
from tests.review.screens import shots

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_demo_v1_starts_without_a_message_under_a_rendered_description(
    asgi_server, celery_worker, browser_page, reviewer
):
    page = browser_page(asgi_server, "rita")
    page.goto("/threads/new/?graph=demo_v1")
    page.wait_for_selector("#start-form-fields[data-graph=demo_v1]")
    description = page.locator("#graph-description")
    assert description.locator("code:text-is('create_agent')").count() == 1
    assert "`" not in description.inner_text()
    shots(page, "new-thread-demo-v1")

    page.click("button.primary")  # no message, no title
    page.wait_for_url("**/threads/*/")
    page.wait_for_selector("article.interrupt:has-text('send_email')", timeout=60_000)
    run = Run.objects.get()
    assert run.thread.graph == "demo_v1" and run.status == "interrupted"
    messages = page.inner_text("#section-conversation")
    assert "quarterly sales report" in messages
    assert page.errors == []
