"""The README's demo story walked end to end in real Chromium, then read by a second
reviewer: every line a reviewer or an auditor reads (the card, the history, the toast,
the Slack message, the mail page, analytics) is checked against the database rows it
stands for (HumanInterrupt, Approval, Run, AuditEvent), not against a script.

One daphne and one Celery worker (real Postgres, Redis), a real SMTP sink
(tests/ops/notify_helpers.py) and Slack's side played by its stand-in
(tests/integrations/slack/conftest.py), presses signed as Slack signs them.

The walk: rita starts the demo, answers the quarter and edits the mail's recipient;
quinn's three small requests wait and rita accepts them in one bulk decision while sam
watches his inbox; the reviewers' group then needs two approvals, and rita goes back in
time to the step before the mail, forking the run; the fork's mail is approved once by
sam from his e-mail and once by tess from Slack (rita, who asked, is offered no Approve
in her own mail). Then sam reads it all.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from hitl.core import runs
from hitl.core.models import (
    Approval,
    AuditEvent,
    HumanInterrupt,
    Notification,
    NotificationPreference,
    ReviewerGroupPolicy,
    Run,
    SlackUserLink,
    Thread,
)
from hitl.ops.views import human_seconds, percentile
from tests.conftest import _make_user, wait_for
from tests.integrations.email.test_browser_claim_refusal import anonymous_page  # noqa: F401
from tests.integrations.slack.conftest import (
    SECRET,
    TEAM,
    button,
    buttons,
    form_body,
    press,
    sign,
    slack_fixture,  # noqa: F401
)
from tests.ops.notify_helpers import smtp_fixture, text_of, with_email  # noqa: F401
from tests.review import test_browser as base
from tests.review.conftest import checkpoints
from tests.review.test_browser_timetravel import _open_history, _open_step

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

PUBLIC = "https://hitl.example.com"  # the mail's links; the test follows their paths
SHOTS = base.ROOT / "var" / "walk-shots"


@pytest.fixture
def walk_env(smtp, slack, monkeypatch, settings):
    """The web and worker processes mail through the sink and talk to Slack's stand-in;
    this process does what they do (its runs go to the worker too)."""
    env = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp.port),
        "HITL_PUBLIC_URL": PUBLIC,
        "HITL_NOTIFY_BATCH_SECONDS": "0.2",
        "HITL_SLACK_SIGNING_SECRET": SECRET,
        "HITL_SLACK_API_URL": f"{slack.base}/api/",
        "HITL_WEBHOOK_HOSTS": f"127.0.0.1:{slack.port}",
        "HITL_WEBHOOK_ALLOW_PRIVATE": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings.HITL_EXECUTOR = "celery"
    settings.HITL_PUBLIC_URL = PUBLIC
    return env


def _links(message) -> dict[str, str]:
    found = re.findall(r"^\s+(Approve|Ignore|Respond): (\S+)$", text_of(message), re.M)
    return {label: url[len(PUBLIC) :] for label, url in found}


def _press_signed(base_url: str, payload: dict) -> httpx.Response:
    """POST an interaction to the web process exactly as Slack does."""
    body = form_body(payload)
    stamp = str(int(time.time()))
    return httpx.post(
        f"{base_url}/slack/interactivity/",
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": sign(body, stamp),
        },
        timeout=30,
    )


def _slack_text(body: dict) -> str:
    """Every text a person reads in a Slack message body."""
    parts = [body.get("text") or ""]
    for block in body.get("blocks") or []:
        for piece in [block.get("text") or {}, *(block.get("elements") or [])]:
            if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                parts.append(piece["text"])
        for field in block.get("fields") or []:
            parts.append(field.get("text", ""))
    return "\n".join(parts)


def _every_step(page) -> None:
    """Open the thread page's history and page back to its start."""
    _open_history(page)
    while page.locator("#history a[data-more]").count():
        shown = page.locator("#history li.checkpoint").count()
        page.click("#history a[data-more]")
        wait_for(lambda n=shown: page.locator("#history li.checkpoint").count() > n, what="a page")


def _done(thread: Thread) -> bool:
    thread.refresh_from_db()
    return thread.status == "done"


def test_the_demo_story_reads_as_the_database_says_to_a_second_reviewer(
    walk_env,
    asgi_server,
    worker_factory,
    browser_page,
    anonymous_page,  # noqa: F811
    slack,
    smtp,
    reviewers_group,
    reviewer,
    second_reviewer,
    requester,
):
    worker_factory("walk")
    tess = _make_user("tess", reviewers_group)
    # sam reads analytics too: he may see every group's items.
    second_reviewer.user_permissions.add(
        Permission.objects.get(codename="review_all", content_type__app_label="hitl")
    )
    rita = browser_page(asgi_server, "rita")
    sam = browser_page(asgi_server, "sam")
    SHOTS.mkdir(parents=True, exist_ok=True)

    # --- 1. rita starts the demo, answers the quarter, edits the recipient ---------------
    rita.goto("/threads/new/")
    rita.select_option("#id_graph", "demo")
    rita.fill("#id_title", "Quarterly sales report")
    rita.click("button.primary")
    rita.wait_for_url("**/threads/*/")
    thread = Thread.objects.get(title="Quarterly sales report")
    rita.locator("article.interrupt button.option:has-text('Q3 2025')").click()
    rita.wait_for_selector("article.interrupt input[data-key=to]")
    rita.locator("article.interrupt input[data-key=to]").fill("cfo@example.com")
    rita.click("article.interrupt button.btn-edit")
    wait_for(lambda: _done(thread), 60, what="the demo run to end")
    edited = HumanInterrupt.objects.get(thread=thread, action="send_email")
    assert (edited.response_type, edited.responded_by) == ("edit", reviewer)
    assert edited.response_args["args"]["to"] == "cfo@example.com"

    # --- 2. a bulk decision while sam watches his inbox ----------------------------------
    sam.wait_for_selector("#live-indicator[data-state=live]")
    base.mark_no_reload(sam)
    small = [
        runs.run_start(
            graph="approval", input={"request": f"note {n}"}, user=requester, title="Weekly notes"
        ).thread
        for n in range(3)
    ]
    wait_for(
        lambda: HumanInterrupt.objects.filter(thread__in=small, status="pending").count() == 3,
        60,
        what="quinn's three requests to wait",
    )
    rita.goto("/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    bulk_ids = [str(r.pk) for r in HumanInterrupt.objects.filter(thread__in=small)]
    for pk in bulk_ids:
        rita.locator(f"#row-{pk} input.pick-box").check()
    rita.once("dialog", lambda dialog: dialog.accept())
    rita.click("[data-bulk=accept]")
    rita.wait_for_selector("#bulk-result-panel")
    wait_for(
        lambda: all(_done(t) for t in small), 60, what="the bulk-accepted runs to resume and end"
    )
    bulk_rows = HumanInterrupt.objects.filter(pk__in=bulk_ids)
    assert {(r.status, r.response_type, r.responded_by_id) for r in bulk_rows} == {
        ("resolved", "accept", reviewer.pk)
    }
    # What sam's toast says is who answered, how many, on which threads.
    toast = sam.wait_for_selector(f".toast:has-text('answered {len(bulk_ids)} items')")
    titles = sorted({r.thread.title for r in bulk_rows})
    assert toast.inner_text().startswith(
        f"{reviewer.username} answered {len(bulk_ids)} items on "
        + ", ".join(f"“{t}” ({sum(r.thread.title == t for r in bulk_rows)})" for t in titles)
    )
    base.assert_not_reloaded(sam)
    summary = rita.inner_text("#bulk-result-panel header")
    assert f"{bulk_rows.filter(status='resolved').count()} decided" in summary

    # --- 3. four-eyes from now on; rita goes back to the step before the mail -----------
    ReviewerGroupPolicy.objects.create(group=reviewers_group, approvals_required=2)
    with_email(reviewer, "rita@example.com")
    with_email(second_reviewer, "sam@example.com")
    NotificationPreference.objects.create(user=tess, email=False, slack_webhook_url=slack.webhook)
    SlackUserLink.objects.create(slack_user_id="U0TESS", team_id=TEAM, user=tess)
    rita.goto(f"/threads/{thread.pk}/")
    _every_step(rita)
    # The step whose next node runs the mail (the call proposed, not yet approved).
    proposed = rita.locator("#history li.checkpoint", has_text="tools ran send_email")
    expect(proposed).to_have_count(1)
    (before_mail,) = [
        cp
        for cp in checkpoints(thread)
        if cp["checkpoint_id"] == proposed.get_attribute("data-checkpoint")
    ]
    assert before_mail["next"] == ["tools"]
    step = _open_step(rita, before_mail["checkpoint_id"])
    with rita.expect_navigation():
        step.locator("button.btn-fork").click()
    fork = Run.objects.filter(thread=thread).order_by("-created_at").first()
    assert fork.metadata["forked_from"] == before_mail["checkpoint_id"]
    four_eyes = wait_for(
        lambda: HumanInterrupt.objects.filter(thread=thread, status="pending").first(),
        60,
        what="the fork to ask for the mail again",
    )
    assert (four_eyes.action, four_eyes.approvals_required) == ("send_email", 2)

    # --- 4. one approval by mail (sam), rita's own mail offers no Approve -------------
    mails = wait_for(
        lambda: (
            (found := {m["To"].split("@")[0]: m for m in smtp.messages()})
            and {"rita", "sam"} <= set(found)
            and found
        ),
        30,
        what="the mail to rita and sam",
    )
    assert "Approve" not in _links(mails["rita"])
    assert four_eyes.args["to"] in text_of(mails["sam"])
    mail_page = anonymous_page(asgi_server)
    mail_page.goto(_links(mails["sam"])["Approve"])
    mail_page.click("button:has-text('Confirm: Approve')")
    mail_page.wait_for_selector("h1:has-text('Approved')")
    (by_mail,) = Approval.objects.filter(interrupt=four_eyes)
    assert by_mail.user == second_reviewer
    assert (
        f"Approval recorded ({Approval.objects.filter(interrupt=four_eyes).count()} of "
        f"{four_eyes.approvals_required} approvals)" in mail_page.inner_text("[role=status]")
    )

    # sam's card says how far the approvals are, as the Approval rows do.
    sam.goto(f"/threads/{thread.pk}/")
    sam.wait_for_selector("#live-indicator[data-state=live]")
    base.mark_no_reload(sam)
    card = f"#interrupt-{four_eyes.pk}"
    progress = sam.inner_text(f"{card} .approvals")
    assert f"1 of {four_eyes.approvals_required} approvals" in progress
    assert f"approved by {by_mail.user.username}" in progress
    # He approved by mail: the card knows it, and lets him not approve twice.
    assert Approval.objects.filter(interrupt=four_eyes, user=second_reviewer).exists()
    assert "You have approved these args already" in sam.inner_text(f"{card} .approve-refusal")
    assert sam.is_disabled(f"{card} button.btn-accept")

    # --- 5. the second by tess, pressing Approve in Slack ------------------------------
    posted = wait_for(lambda: slack.to("/services/"), 30, what="tess's Slack message")
    message = posted[-1]["body"]
    # What tess reads before pressing: the args and the approvals so far, as the rows were
    # when it was posted (the mail's approval came after; a webhook message cannot change
    # until someone presses in it).
    posted_text = _slack_text(message)
    assert four_eyes.args["to"] in posted_text
    assert f"Needs {four_eyes.approvals_required} approvals: 0 so far" in posted_text
    response = _press_signed(
        asgi_server, press(slack, message, button(message, "hitl_accept", four_eyes.pk), "U0TESS")
    )
    assert response.status_code == 200, response.text
    wait_for(lambda: _done(thread), 60, what="the fork to resume and end")
    four_eyes.refresh_from_db()
    approvals = list(Approval.objects.filter(interrupt=four_eyes).order_by("created_at"))
    assert [a.user.username for a in approvals] == ["sam", "tess"]
    assert (four_eyes.status, four_eyes.responded_by) == ("resolved", tess)
    wait_for(
        lambda: any("Approved by" in _slack_text(r["body"]) for r in slack.to("/actions/")),
        30,
        what="the Slack message updated after tess's press",
    )

    # --- 6. sam reads it all -------------------------------------------------------------
    # The Slack message, as Slack last received it: who decided, no button left to press.
    last = slack.to("/actions/")[-1]["body"]
    said = _slack_text(last)
    # Four-eyes: both approvers, as the Approval rows say (not only the last presser).
    assert "✅ Approved by " + " and ".join(f"*{a.user.username}*" for a in approvals) in said
    assert not [b for b in buttons(last) if b["action_id"] in ("hitl_accept", "hitl_undo")]
    assert "may still be undone" not in said

    # The mail page, opened again from sam's mail: the link was used; the item's outcome.
    mail_page.goto(_links(mails["sam"])["Approve"])
    heading = mail_page.inner_text("h1")
    assert heading == f"Link used already: {four_eyes.action}"
    used = mail_page.inner_text(".email-action")
    assert f"The item is {four_eyes.get_status_display().lower()}" in used

    # The card, live on sam's page: who approved, as the rows say; nothing left to press.
    names = " and ".join(a.user.username for a in approvals)
    sam.wait_for_selector(f"{card} :text('{names} approved it as proposed')")
    sam.wait_for_selector(f"{card} button.btn-accept", state="detached")
    # sam's own approval counted: no "answered over your head" alarm on his card.
    said_on_card = sam.inner_text(f"{card} [role=status]")
    assert said_on_card == (
        f"Your approval counted; {four_eyes.responded_by.username} gave the last one."
    )
    assert sam.locator(f"{card} .form-error").count() == 0
    base.assert_not_reloaded(sam)
    for width in (390, 1366):
        sam.set_viewport_size({"width": width, "height": 900})
        sam.locator(card).screenshot(path=str(SHOTS / f"card-{width}.png"))
    sam.set_viewport_size({"width": 1280, "height": 900})

    # The audit trail: one line per approval, each the AuditEvent's.
    sam.reload()
    lines = sam.locator("#audit-trail tr.audit-interruptapproved")
    events = list(
        AuditEvent.objects.filter(kind="interrupt.approved", interrupt_id=four_eyes.pk).order_by(
            "created_at"
        )
    )
    assert [e.actor for e in events] == [a.user for a in approvals]
    expect(lines).to_have_count(len(events))
    for line, event, via in zip(lines.all(), events, ("e-mail", "Slack"), strict=True):
        text = line.inner_text()
        assert event.actor.username in text
        assert (
            f"approval {event.data['approvals']} of {event.data['required']} "
            f"on {four_eyes.action} via {via}"
        ) in text

    # The history: each decision by whom, the edited call with the args it ran with.
    _every_step(sam)
    history = sam.inner_text("#history")
    ran = edited.response_args["args"]
    assert f"tools ran send_email (to: {ran['to']}" in history
    assert (
        f"edited by {edited.responded_by.username}: to {edited.args['to']} → {ran['to']}" in history
    )
    # The fork's mail: accepted, by the two approvers the Approval rows name (one verb).
    fork_line = sam.locator(
        "#history li.checkpoint", has_text=f"tools ran {four_eyes.action}"
    ).filter(has_text="Forked by")
    assert f"accepted by {', '.join(a.user.username for a in approvals)}" in (
        fork_line.inner_text()
    )
    assert "accepted approved" not in history
    fork_event = AuditEvent.objects.get(kind="thread.forked")
    assert fork_event.actor == reviewer
    assert f"fork 1, from step {before_mail['step']}" in sam.inner_text("#section-runs")
    for width in (390, 1366):
        sam.set_viewport_size({"width": width, "height": 900})
        sam.locator("#history").screenshot(path=str(SHOTS / f"history-{width}.png"))

    # Analytics: the counts per group and graph, and the p50, are the rows'.
    sam.goto("/analytics/")
    sam.click("text=The numbers as a table")
    table = sam.inner_text(".analytics details table tbody")
    answered = HumanInterrupt.objects.exclude(response_type="").select_related("reviewer_group")
    expected: dict[tuple[str, str], dict[str, int]] = {}
    for row in answered:
        kind = "rule" if row.decided_by_rule else row.response_type
        bar = expected.setdefault((row.reviewer_group.name, row.thread.graph), {})
        bar[kind] = bar.get(kind, 0) + 1
    for (group, graph), counts in expected.items():
        line = f"{group}\t{graph}\t" + ", ".join(
            f"{kind} {n}"
            for kind in ("accept", "edit", "response", "ignore")
            if (n := counts.get(kind))
        )
        assert line in table, (line, table)
    seconds = sorted(
        (row.responded_at - row.created_at).total_seconds()
        for row in answered
        if not row.decided_by_rule
    )
    latency = sam.text_content("#latency-chart")
    assert f"{len(seconds)} decisions" in latency
    assert f"p50 {human_seconds(percentile(seconds, 50))}" in latency
    assert f"p95 {human_seconds(percentile(seconds, 95))}" in latency
    for width in (390, 1366):
        sam.set_viewport_size({"width": width, "height": 900})
        sam.screenshot(path=str(SHOTS / f"analytics-{width}.png"), full_page=True)
    assert Notification.objects.filter(status="sent").count() >= 3
    assert rita.errors == [] and sam.errors == [] and mail_page.errors == []
    expect(sam.locator("body")).not_to_contain_text("Traceback")
