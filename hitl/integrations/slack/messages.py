"""What a Slack message says: one Block Kit section per item, with buttons for what it allows.

Buttons (Approve, Ignore, Respond) appear only while the item is pending and the app's
interactivity is set up (HITL_SLACK_SIGNING_SECRET); Respond needs a bot token for its
modal. Edit stays a link to the card. A decided item shows who decided what, and how.
"""

from __future__ import annotations

import re
from typing import Any

import md2mrkdwn
from django.conf import settings
from django.utils import timezone

from hitl.core.access.summary import action_label, item_summary, short
from hitl.core.audit import VIA
from hitl.core.decisions.claims import active_claim
from hitl.core.decisions.quorum import approvals_progress, approve_refusal
from hitl.core.models import AuditEvent, HumanInterrupt, Notification
from hitl.ops import notify_messages

MAX_ITEMS = 12  # each item takes up to 4 blocks; Slack allows 50 per message
DONE = {
    "accept": "✅ Approved",
    "edit": "✅ Edited and approved",
    "ignore": "⛔ Ignored",
    "response": "💬 Answered",
}
ACTION_IDS = {"accept": "hitl_accept", "ignore": "hitl_ignore", "response": "hitl_respond"}


def escape(text: str) -> str:
    # Slack's mrkdwn control characters (its documented escaping).
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# After escape() every <…> of converted text is a link the converter made.
SLACK_LINK = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")
LINK_SCHEMES = ("https://", "http://", "mailto:")


def mrkdwn(markdown: str) -> str:
    """Markdown (an agent's description) as Slack mrkdwn: **bold** as *bold*, links as
    <url|text>; a link to anything but a web or mail address (<!channel>, <@U123>: a
    mention) keeps only its text."""
    return SLACK_LINK.sub(_kept_link, md2mrkdwn.convert(escape(markdown)))


def _kept_link(match: re.Match) -> str:
    target, label = match.group(1), match.group(2)
    if target.lower().startswith(LINK_SCHEMES):
        return match.group(0)
    return label or target


def interactive() -> bool:
    return bool(settings.HITL_SLACK_SIGNING_SECRET)


def block_id(notification: Notification, row: HumanInterrupt) -> str:
    return f"hitl:{notification.pk}:{row.pk}"


def button_value(row: HumanInterrupt) -> str:
    # The four-eyes round the message showed: an approval of args edited since is refused.
    return f"{row.pk}:{row.approval_round}"


def _via(row: HumanInterrupt) -> str:
    data = (
        AuditEvent.objects.filter(interrupt_id=row.pk, kind=AuditEvent.Kind.INTERRUPT_ANSWERED)
        .order_by("-created_at", "-id")
        .values_list("data", flat=True)
        .first()
    ) or {}
    via = data.get("via")
    return f" via {VIA.get(via, via)}" if via else ""


def _outcome(row: HumanInterrupt) -> str:
    if row.status == HumanInterrupt.Status.RESOLVED:
        who = f"*{escape(row.answered_by or 'someone')}*{_via(row)}"
        if row.approvals_required > 1 and row.response_type in ("accept", "edit"):
            # Four-eyes: every approver, as the card and the history name them; the last
            # one's "via" would read as everyone's, so the audit trail keeps that.
            approvers = approvals_progress(row)["approvers"]
            if len(approvers) > 1:
                named = [f"*{escape(name)}*" for name in approvers]
                who = ", ".join(named[:-1]) + " and " + named[-1]
        when = timezone.localtime(row.responded_at).strftime("%H:%M %Z") if row.responded_at else ""
        text = f"{DONE.get(row.response_type, row.response_type)} by {who}"
        text += f" at {when}" if when else ""
        if row.response_type == "response" and isinstance(row.response_args, str):
            text += f": “{escape(short(row.response_args))}”"
        if row.undo_until and row.undo_until > timezone.now():
            text += " (may still be undone)"
        return text
    if row.status == HumanInterrupt.Status.EXPIRED:
        return "⌛ Expired" + (f" (auto-{row.response_type})" if row.response_type else "")
    return f"✖ {row.get_status_display().capitalize()}"


def _buttons(
    notification: Notification, row: HumanInterrupt, link: str, *, refused: str
) -> dict[str, Any]:
    elements: list[dict[str, Any]] = []
    value = button_value(row)
    if row.allow_accept and not refused:
        elements.append(_button("Approve", "hitl_accept", value, style="primary"))
    if row.allow_ignore:
        elements.append(_button("Ignore", "hitl_ignore", value, style="danger"))
    if row.allow_respond and settings.HITL_SLACK_BOT_TOKEN:
        elements.append(_button("Respond…", "hitl_respond", value))
    label = "Edit in HITL" if row.allow_edit and not refused else "Open in HITL"
    elements.append({**_button(label, "hitl_open", value), "url": link})
    return {"type": "actions", "block_id": block_id(notification, row), "elements": elements}


def _button(text: str, action_id: str, value: str, style: str = "") -> dict[str, Any]:
    button = {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def item_blocks(notification: Notification, row: HumanInterrupt) -> list[dict[str, Any]]:
    """The blocks of one item: what it asks, and its buttons or its outcome."""
    link = notify_messages.deep_link(row.pk)
    title = f"*<{link}|{escape(action_label(row))}>*"
    if row.thread_id:
        title += f"  ·  thread “{escape(short(row.thread.title))}”"
    if row.reviewer_group_id:
        title += f"  ·  {escape(row.reviewer_group.name)}"
    section: dict[str, Any] = {"type": "section", "text": {"type": "mrkdwn", "text": title}}
    summary = item_summary(row)
    if summary:
        section["fields"] = [
            {"type": "mrkdwn", "text": f"*{escape(name)}*\n{escape(value)}"}
            for name, value in summary[:10]
        ]
    blocks: list[dict[str, Any]] = [section]
    notes = []
    if row.description:
        notes.append(mrkdwn(row.description.strip()[:500]))
    pending = row.status == HumanInterrupt.Status.PENDING
    if pending and row.approvals_required > 1:
        progress = approvals_progress(row)
        who = ", ".join(progress["approvers"]) or "none yet"
        notes.append(
            f"Needs {progress['required']} approvals: {progress['approvals']} so far ({escape(who)})"
        )
    if pending:
        claim = active_claim(row)
        if claim is not None:
            notes.append(
                f"🙋 {escape(claim.user.get_username())} is on it until "
                f"{timezone.localtime(claim.expires_at):%H:%M %Z}"
            )
    # A message to one person: Approve is left out where their approval would be refused
    # (four-eyes), as the browser's card disables it.
    refused = ""
    if pending and notification.user_id is not None and row.allow_accept:
        refused = approve_refusal(row, notification.user)
        if refused:
            notes.append(f"No Approve for you: {escape(refused)}")
    if not pending:
        notes.append(_outcome(row))
    if notes:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": note[:2900]} for note in notes[:10]],
            }
        )
    if pending and interactive():
        blocks.append(_buttons(notification, row, link, refused=refused))
    elif (
        row.status == HumanInterrupt.Status.RESOLVED
        and row.undo_until
        and row.undo_until > timezone.now()
        and interactive()
    ):
        blocks.append(
            {
                "type": "actions",
                "block_id": block_id(notification, row),
                "elements": [_button("Undo", "hitl_undo", button_value(row))],
            }
        )
    return blocks


def message_payload(
    notification: Notification, rows: list[HumanInterrupt], subject: str
) -> dict[str, Any]:
    """The whole message: a header, then each listed item (up to MAX_ITEMS)."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{escape(subject)}*"}}
    ]
    for row in rows[:MAX_ITEMS]:
        blocks.append({"type": "divider"})
        blocks.extend(item_blocks(notification, row))
    if len(rows) > MAX_ITEMS:
        inbox = settings.HITL_PUBLIC_URL + "/"
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"… and {len(rows) - MAX_ITEMS} more: <{inbox}|open the inbox>",
                    }
                ],
            }
        )
    return {"text": subject, "blocks": blocks}


def render(
    notification: Notification, rows: list[HumanInterrupt], tokens: list[str] | None = None
) -> tuple[str, str, dict[str, Any]]:
    """(subject, plain text, Block Kit payload) for the rows it lists (no one-click tokens)."""
    subject, text, _ = notify_messages.render(notification, rows)
    return subject, text, message_payload(notification, rows, subject)
