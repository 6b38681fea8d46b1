"""A decision rule in real Chromium: saved in admin, then accepting an item live."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.core import runs
from hitl.core.models import DecisionRule, HumanInterrupt, Run, Thread
from tests.review import test_browser as base
from tests.review.test_browser import assert_not_reloaded, mark_no_reload

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

SHOTS = Path("/tmp/w14-shots")


def shot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_rule_saved_in_admin_accepts_an_item_live(
    asgi_server, browser_page, manual_runs, admin_user, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    ada = browser_page(asgi_server, "ada")
    ada.goto("/admin/hitl/decisionrule/add/")
    ada.fill("#id_name", "internal-mail")
    ada.select_option("#id_mode", "live")
    ada.fill("#id_action", "send_email")
    # First a typo: refused on save, with the reason.
    ada.fill("#id_condition", 'recipient.endsWith("@ourcompany.com")')
    ada.select_option("#id_outcome", "accept")
    ada.click("input[name=_save]")
    ada.wait_for_selector("text=Unknown name 'recipient' in the condition")
    shot(ada, "rule-refused")
    assert not DecisionRule.objects.exists()
    ada.fill("#id_condition", 'args.to.endsWith("@ourcompany.com")')
    ada.click("input[name=_save]")
    ada.wait_for_url("**/admin/hitl/decisionrule/")
    assert DecisionRule.objects.get().mode == "live"

    # The requester watches their thread while the agent runs into the approval.
    run = runs.run_start(
        graph="approval", input={"to": "ann@ourcompany.com"}, user=requester, title="Mail Ann"
    )
    quinn = browser_page(asgi_server, "quinn")
    quinn.goto(f"/threads/{run.thread_id}/")
    quinn.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(quinn)

    assert manual_runs(run) == "interrupted"
    row = HumanInterrupt.objects.get(run=run)
    assert (row.status, row.decided_by_rule) == ("resolved", "internal-mail v1")
    quinn.wait_for_selector("text=automatically, by rule internal-mail v1")
    [resume] = Run.objects.filter(thread_id=run.thread_id, kind="resume")
    assert manual_runs(resume) == "success"
    quinn.wait_for_selector("#section-status .status-done, [data-status=done]")
    assert_not_reloaded(quinn)
    assert quinn.locator(f"#interrupt-{row.pk} button.btn-accept").count() == 0
    shot(quinn, "rule-accepted-live")
    assert Thread.objects.get(pk=run.thread_id).status == "done"

    # The admin list shows the live decision as evidence.
    ada.goto("/admin/hitl/decisionrule/")
    assert ada.text_content("td.field-live_decisions").strip() == "1"
    shot(ada, "rule-admin-list")
    ada.goto("/analytics/")
    assert "Rules decided 1 item" in ada.text_content("#time-saved")
    assert "internal-mail v1" in ada.text_content("#automation-rules")
    shot(ada, "rule-analytics")
    assert not quinn.errors and not ada.errors
