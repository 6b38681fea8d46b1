"""The start form in real headless Chromium: fields from the graph's input schema, inline
errors that create nothing, the JSON toggle, and the thread page following the run.

Screenshots (1366 and 390 px wide) land in test-artifacts/, or in $HITL_SHOTS_DIR.
"""

from __future__ import annotations

import json

import pytest

from hitl.core.models import Run, Thread
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.test_browser_responsive import DESKTOP, PHONE, shots_dir
from tests.review.test_start_form import TICKET_INPUT

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def shot(page, name: str) -> None:
    page.screenshot(path=str(shots_dir() / f"{name}.png"), full_page=True)


def field(page, key: str) -> str:
    return f"#start-form-fields [data-key={key}]"


def test_the_start_form_refuses_a_bad_field_then_starts_and_follows_the_run_to_its_item(
    asgi_server, celery_worker, browser_page, reviewer
):
    page = browser_page(asgi_server, "rita")
    page.set_viewport_size(DESKTOP)
    page.goto("/threads/new/")
    page.select_option("#id_graph", "ticket_triage")
    page.wait_for_selector("#start-form-fields[data-graph=ticket_triage]")
    page.fill("#id_title", "Printer on fire")
    page.fill(field(page, "summary"), TICKET_INPUT["summary"])
    page.fill(field(page, "customer"), "ACME")
    page.select_option(field(page, "priority"), label="urgent")
    page.fill(field(page, "contract_value"), "lots")  # not a number
    page.fill(field(page, "tags"), "hardware\nfire")
    shot(page, "start-form-desktop")

    # Seats left empty and a bad number: inline errors from the server, nothing created.
    page.click("button.primary")
    page.wait_for_selector(".field.invalid [data-key=contract_value]")
    assert page.inner_text(".widget-number .field-error") == "Enter a number."
    assert page.inner_text(".widget-integer .field-error") == "Required."
    assert "Nothing was started" in page.inner_text(".form-error")
    assert page.input_value(field(page, "summary")) == TICKET_INPUT["summary"]
    assert page.input_value("#id_title") == "Printer on fire"
    assert not Thread.objects.exists() and not Run.objects.exists()
    shot(page, "start-form-error")

    page.fill(field(page, "seats"), "12")
    page.fill(field(page, "contract_value"), "1500.5")
    page.check(field(page, "notify_customer"))
    page.click("button.primary")
    page.wait_for_url("**/threads/*/")

    # The progress view follows the run until it pauses, then leads to the item.
    outcome = page.wait_for_selector("#run-outcome:not([hidden]) a:has-text('Go to the item')")
    assert "Paused" in page.inner_text("#run-outcome")
    page.wait_for_selector("article.interrupt:has-text('route_ticket')")
    shot(page, "start-progress-paused")
    outcome.click()
    page.wait_for_url("**/threads/*/#interrupt-*")
    run = Run.objects.get()
    assert run.input == TICKET_INPUT
    assert run.thread.title == "Printer on fire" and run.status == "interrupted"
    assert page.errors == []


def test_the_start_form_on_a_phone_and_its_json_toggle(asgi_server, browser_page, reviewer):
    page = browser_page(asgi_server, "rita")
    page.set_viewport_size(PHONE)
    page.goto("/threads/new/?graph=ticket_triage")
    page.fill(field(page, "summary"), "Badge reader broken")
    page.fill(field(page, "seats"), "3")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, "start-form-phone")

    # Advanced (JSON): the editor opens with what the form holds so far.
    page.click("label.mode-option:has-text('Advanced (JSON)')")
    page.wait_for_selector("#start-json:not([hidden])")
    assert page.is_hidden("#start-form-fields")
    assert json.loads(page.input_value("#id_input")) == {
        "summary": "Badge reader broken",
        "seats": 3,
        "notify_customer": False,
    }
    page.fill("#id_input", '{"summary": "x", "seats": "three"}')
    page.click("button.primary")
    page.wait_for_selector("#start-json.invalid .field-error")
    errors = page.inner_text("#start-json")
    assert "seats: 'three' is not of type 'integer'" in errors and "customer: Required." in errors
    assert not Thread.objects.exists()
    shot(page, "start-form-json-error-phone")

    # A message-based agent gets a message box; its other keys wait under "More".
    page.set_viewport_size(DESKTOP)
    page.goto("/threads/new/?graph=demo")
    assert page.is_visible("#start-form-fields [data-type=message]")
    assert page.is_hidden("#start-form-fields [data-key=reviewer_group]")
    page.fill("#start-form-fields [data-type=message]", "Prepare the Q3 report, please.")
    page.click("details.more-fields summary")
    assert page.is_visible("#start-form-fields [data-key=reviewer_group]")
    shot(page, "start-form-demo-messages")
    assert page.errors == []


def test_a_message_agent_started_from_the_message_box_is_followed_while_it_works(
    asgi_server, worker_factory, browser_page, reviewer
):
    worker_factory("slow", HITL_SCRIPTED_DELAY="2")  # every model call takes 2 s
    page = browser_page(asgi_server, "rita")
    page.set_viewport_size(DESKTOP)
    page.goto("/threads/new/?graph=demo")
    page.fill("#start-form-fields [data-type=message]", "Prepare the sales report, please.")
    page.click("button.primary")
    page.wait_for_url("**/threads/*/")
    page.wait_for_selector("#run-progress:not([hidden])")
    wait_for(lambda: page.inner_text("#run-progress .doing") != "", what="the current node")
    shot(page, "start-progress-working")
    page.wait_for_selector(
        "#run-outcome:not([hidden]) a:has-text('Go to the item')", timeout=60_000
    )
    assert page.is_hidden("#run-progress")
    assert "Which quarter" in page.inner_text("article.interrupt")
    assert Run.objects.get().input == {
        "messages": [{"role": "user", "content": "Prepare the sales report, please."}]
    }
    assert page.errors == []
