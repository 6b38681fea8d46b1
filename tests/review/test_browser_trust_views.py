"""Issue 28 in real Chromium: analytics that add up and fit a 360 px phone, and inbox
filters folded behind a button on phones."""

from __future__ import annotations

import pytest
from django.utils import timezone

from hitl.core import decisions
from hitl.core.models import HumanInterrupt
from tests.ops.analytics_helpers import internal_mail_rule, people_took_four_and_eight_minutes
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser_responsive import page_at  # noqa: F401

chromium = base.chromium
pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def wide(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


@pytest.fixture(autouse=True)
def manual(settings):
    settings.HITL_EXECUTOR = "manual"


@pytest.fixture
def analytics_at(asgi_server, page_at, admin_user):  # noqa: F811
    """The analytics page as the admin sees it in a viewport `width` by `height`."""

    def open_at(width: int, height: int):
        page = page_at(asgi_server, admin_user.username, {"width": width, "height": height})
        page.goto("/analytics/")
        return page

    return open_at


def test_analytics_keeps_rule_decisions_apart_and_fits_a_small_phone(
    analytics_at, requester, reviewer
):
    internal_mail_rule("internal-mail-with-a-long-name")
    _, (by_rita, by_rule) = open_interrupts(
        user=requester, values=[human_interrupt("send_email"), human_interrupt("send_email")]
    )
    decisions.interrupt_resolve(interrupt_id=by_rita.pk, user=reviewer, response_type="accept")
    HumanInterrupt.objects.filter(pk=by_rule.pk).update(
        status="resolved",
        response_type="accept",
        decided_by_rule="internal-mail-with-a-long-name",
        responded_at=timezone.now(),
    )
    page = analytics_at(360, 740)
    # A rule's accept is not a person's: the counts name it apart.
    page.click("text=The numbers as a table")
    counts = page.inner_text(".analytics details table tbody")
    assert "accept 1" in counts and "rule 1" in counts
    assert "rule" in page.text_content("#decisions-chart")
    # Nothing wider than the phone: no sideways scroll of the page.
    assert wide(page) <= 360
    # The charts are drawn for the phone's width: their words stay readable, not shrunk
    # to a third (the desk layout at 360 px drew 12 px text about 4 px high).
    assert not page.is_visible("#decisions-chart") and page.is_visible("#decisions-chart-phone")
    for chart in ("#decisions-chart-phone", "#latency-chart-phone"):
        heights = page.eval_on_selector_all(
            f"{chart} text", "els => els.map(e => e.getBoundingClientRect().height)"
        )
        assert heights and min(heights) >= 10, (chart, heights)
    desk = analytics_at(1366, 900)
    assert desk.is_visible("#decisions-chart") and not desk.is_visible("#decisions-chart-phone")
    assert desk.errors == []
    assert page.errors == []


def test_phone_filters_fold_behind_a_button(
    asgi_server,
    page_at,  # noqa: F811
    reviewer,
    requester,
):
    open_interrupts(user=requester, values=[human_interrupt("send_email")])
    phone = page_at(asgi_server, "rita", {"width": 390, "height": 844})
    assert not phone.is_visible("#filters")
    # Measured inside the page in one step: a resync may swap the rows out between a
    # locator's wait and its measure, and a detached row has no box.
    phone.wait_for_selector("#live-indicator[data-state=live]")
    row_top = phone.wait_for_function(
        """() => {
            const row = document.querySelector("tbody tr.row");
            const box = row && row.getBoundingClientRect();
            return box && box.height > 0 ? box.top : null;
        }"""
    ).json_value()
    assert row_top < 844 / 2  # the first item shows in the top half of the first screen
    phone.click("#filters-toggle")
    assert phone.is_visible("#filters select[name=group]")
    assert phone.get_attribute("#filters-toggle", "aria-expanded") == "true"
    desk = page_at(asgi_server, "rita", {"width": 1366, "height": 900})
    assert desk.is_visible("#filters") and not desk.is_visible("#filters-toggle")
    assert phone.errors == [] and desk.errors == []


def test_analytics_says_one_figure_for_how_long_people_take(analytics_at, requester, reviewer):
    people_took_four_and_eight_minutes(requester=requester, reviewer=reviewer)
    for width in (390, 1366):
        page = analytics_at(width, 900)
        saved = page.text_content("#time-saved")
        chart = "#latency-chart-phone" if width < 600 else "#latency-chart"
        # The time saved uses the people's p50 the chart shows for all groups: no second
        # figure (a "median" of 6 minutes beside a p50 of 4) to doubt.
        assert "people's median (p50) of 4.0m per decision" in saved
        assert "p50 4.0m · p95 8.0m" in page.text_content(chart)
        assert "about 4.0m" in saved
        base.shot(page, f"analytics-one-median-{width}")
        assert page.errors == []
