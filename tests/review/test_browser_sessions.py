"""Sockets check the session in real headless Chromium (issue 27, item 9): two tabs of
one signed-in reviewer; a logout in one tab, the session's expiry or a password change
closes both tabs' sockets with 4401 within seconds, and a new pending item reaches
neither afterwards, while another reviewer's tab still gets it live."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.utils import timezone

from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

chromium = base.chromium
browser_page = base.browser_page
NOTICE = 8.0  # "within seconds"

# Records every socket's close code on the window, before the page's scripts run.
RECORD_CLOSES = """
(() => {
  window.__closes = [];
  const Native = window.WebSocket;
  function Recorded(url, protocols) {
    const socket = protocols === undefined ? new Native(url) : new Native(url, protocols);
    socket.addEventListener("close", (event) => window.__closes.push(event.code));
    return socket;
  }
  Recorded.prototype = Native.prototype;
  for (const name of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) Recorded[name] = Native[name];
  window.WebSocket = Recorded;
})();
"""


def two_tabs(browser_page, base_url: str, username: str):
    first = browser_page(base_url, username)
    first.context.add_init_script(RECORD_CLOSES)
    second = first.context.new_page()
    second.set_default_timeout(base.TIMEOUT_MS)
    tabs = [first, second]
    for tab in tabs:
        tab.goto("/")
        tab.wait_for_selector("#live-indicator[data-state=live]")
        assert tab.evaluate("window.__closes") == []
    return tabs


def assert_closed_4401(tab) -> None:
    # Polled from here: the page's CSP forbids the eval wait_for_function would use.
    wait_for(lambda: 4401 in tab.evaluate("window.__closes"), NOTICE, 0.1, "a 4401 close")
    tab.wait_for_selector("#live-indicator[data-state=offline]")
    assert "Live updates stopped" in tab.inner_text("body")


def assert_no_push_after(tabs, witness, requester) -> None:
    """A new pending item reaches the witness live, and neither closed tab."""
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt("after_the_end")])
    witness.wait_for_selector(f"#row-{row.pk}")
    for tab in tabs:
        assert tab.query_selector(f"#row-{row.pk}") is None


@pytest.fixture
def setting(settings):
    settings.HITL_EXECUTOR = "manual"
    return settings


def witness_tab(browser_page, asgi_server):
    sam = browser_page(asgi_server, "sam")
    sam.wait_for_selector("#live-indicator[data-state=live]")
    return sam


def test_logging_out_in_one_tab_closes_the_other_tabs_socket(
    setting, asgi_server, browser_page, reviewer, second_reviewer, requester
):
    first, second = two_tabs(browser_page, asgi_server, "rita")
    sam = witness_tab(browser_page, asgi_server)
    with first.expect_navigation():
        first.click("button:has-text('Log out')")
    assert_closed_4401(second)
    assert_no_push_after([second], sam, requester)
    base.shot(second, "session-logout-other-tab")


def test_an_expired_session_closes_both_tabs_sockets(
    setting, asgi_server, browser_page, reviewer, second_reviewer, requester
):
    tabs = two_tabs(browser_page, asgi_server, "rita")
    sam = witness_tab(browser_page, asgi_server)
    key = next(c["value"] for c in tabs[0].context.cookies() if c["name"] == "sessionid")
    past = timezone.now() - timedelta(seconds=1)
    assert Session.objects.filter(session_key=key).update(expire_date=past) == 1
    for tab in tabs:
        assert_closed_4401(tab)
    assert_no_push_after(tabs, sam, requester)


def test_a_password_change_closes_both_tabs_sockets(
    setting, asgi_server, browser_page, reviewer, second_reviewer, requester
):
    tabs = two_tabs(browser_page, asgi_server, "rita")
    sam = witness_tab(browser_page, asgi_server)
    reviewer.set_password("a-new-password-for-rita")
    reviewer.save()
    for tab in tabs:
        assert_closed_4401(tab)
    assert_no_push_after(tabs, sam, requester)
