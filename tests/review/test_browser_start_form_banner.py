"""A refused start form in real Chromium: its banner ("fix the highlighted fields") goes
with the fields it speaks of, when the reviewer switches to the JSON editor or to another
graph, and comes back with them."""

from __future__ import annotations

import pytest

from hitl.core.models import Thread
from tests.review import test_browser as base
from tests.review.screens import shots

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_a_refusals_banner_is_cleared_in_the_json_editor_and_for_another_graph(
    asgi_server, browser_page, reviewer
):
    page = browser_page(asgi_server, "rita")
    page.goto("/threads/new/?graph=ticket_triage")
    page.fill("#start-form-fields [data-key=summary]", "Badge reader broken")
    page.fill("#start-form-fields [data-key=contract_value]", "lots")  # not a number
    page.click("button.primary")
    banner = page.locator(".start-form > .form-error")
    banner.wait_for()
    assert "fix the highlighted fields" in banner.inner_text()
    assert not Thread.objects.exists()

    page.click("label.mode-option:has-text('Advanced (JSON)')")
    page.wait_for_selector("#start-json:not([hidden])")
    assert banner.is_hidden()
    shots(page, "start-form-refused-then-json")
    page.click("label.mode-option:has-text('Form')")
    page.wait_for_selector("#start-form-fields:not([hidden])")
    assert banner.is_visible()

    page.select_option("#id_graph", "demo")
    page.wait_for_selector("#start-form-fields[data-graph=demo]")
    assert banner.is_hidden()
    assert page.errors == []
