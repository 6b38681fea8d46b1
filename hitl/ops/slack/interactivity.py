"""Slack's interactivity requests: verify them, find the HITL user, decide as the browser does.

A request counts only when Slack's signature over `v0:{timestamp}:{body}` checks out with
the app's signing secret (slack_sdk's SignatureVerifier, which also refuses timestamps
more than five minutes off) and that signature was never accepted before (a replay).
The presser is mapped to a HITL user by an explicit SlackUserLink (admin), or, when
HITL_SLACK_MATCH_EMAIL is on and the payload carries an e-mail, by that e-mail.
Decisions go through `interrupt_resolve` with the browser's grace period and claims
respected, so permissions, four-eyes, undo and the audit trail are the browser's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from hitl.core import decisions, errors
from hitl.core.access.summary import action_label, args_summary
from hitl.core.models import HumanInterrupt, SlackRequestSeen, SlackUserLink
from hitl.ops.slack import updates
from hitl.ops.slack.blocks import escape

log = logging.getLogger(__name__)

REPLAY_WINDOW = timedelta(minutes=10)  # longer than the verifier's 5-minute tolerance
DECISIONS = {"hitl_accept": "accept", "hitl_ignore": "ignore"}
RESPOND_CALLBACK = "hitl_respond"


class Refused(Exception):
    """A request that is not Slack's (or not fresh): 401, nothing changes."""


class BadRequest(Exception):
    """A genuine request we cannot read: 400."""


@dataclass
class Outcome:
    """What to answer Slack: an HTTP status and an optional JSON body."""

    status: int = 200
    body: dict[str, Any] | None = None


def verify(body: bytes, timestamp: str, signature: str) -> None:
    """Raise Refused unless Slack signed this body recently and we have not seen it."""
    secret = settings.HITL_SLACK_SIGNING_SECRET
    if not secret or not timestamp.isdigit() or not signature.startswith("v0="):
        raise Refused("Missing or malformed Slack signature headers.")
    if not SignatureVerifier(secret).is_valid(body, timestamp, signature):
        raise Refused("Invalid or stale Slack signature.")
    now = timezone.now()
    replay = Refused("This request was received already (a replay).")
    if SlackRequestSeen.objects.filter(signature=signature[:100]).exists():
        raise replay
    try:
        with transaction.atomic():
            SlackRequestSeen.objects.create(signature=signature[:100])
    except IntegrityError:  # the same request twice at once: the unique key lets one in
        raise replay from None
    # Older signatures fail the timestamp check anyway; keep the table small.
    SlackRequestSeen.objects.filter(seen_at__lt=now - REPLAY_WINDOW).delete()


def parse(body: bytes) -> dict[str, Any]:
    try:
        form = parse_qs(body.decode(), strict_parsing=True, max_num_fields=10)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        raise BadRequest("Expected a form-encoded payload= with a JSON object.") from None
    if not isinstance(payload, dict):
        raise BadRequest("Expected a form-encoded payload= with a JSON object.")
    return payload


def hitl_user(payload: dict[str, Any]):
    """The HITL user behind the Slack user who pressed, or None."""
    slack_user = payload.get("user") if isinstance(payload.get("user"), dict) else {}
    slack_id = str(slack_user.get("id") or "")
    team = payload.get("team") if isinstance(payload.get("team"), dict) else {}
    team_id = str(team.get("id") or slack_user.get("team_id") or "")
    if slack_id:
        link = (
            SlackUserLink.objects.filter(slack_user_id=slack_id, team_id__in=[team_id, ""])
            .select_related("user")
            .order_by("-team_id")  # a workspace-specific link wins over a global one
            .first()
        )
        if link is not None:
            return link.user if link.user.is_active else None
    address = slack_user.get("email")
    if settings.HITL_SLACK_MATCH_EMAIL and isinstance(address, str) and "@" in address:
        found = list(get_user_model().objects.filter(is_active=True, email__iexact=address)[:2])
        if len(found) == 1:  # an address two accounts share names nobody
            return found[0]
    return None


def _ids(block_id: str, value: str) -> tuple[str, str, int | None]:
    """(notification id, interrupt id, four-eyes round) from a button."""
    parts = block_id.split(":")
    if len(parts) != 3 or parts[0] != "hitl":
        raise BadRequest("Not a HITL button.")
    interrupt_id, _, round_ = value.partition(":")
    if interrupt_id != parts[2]:
        raise BadRequest("Not a HITL button.")
    return parts[1], interrupt_id, int(round_) if round_.isdigit() and len(round_) < 9 else None


def handle(payload: dict[str, Any]) -> Outcome:
    kind = payload.get("type")
    if kind == "block_actions":
        return _block_actions(payload)
    if kind == "view_submission":
        return _view_submission(payload)
    return Outcome()  # other interactions (shortcuts, closed modals) are not ours


def _block_actions(payload: dict[str, Any]) -> Outcome:
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise BadRequest("No action in the payload.")
    action = actions[0]
    action_id = str(action.get("action_id") or "")
    if action_id == "hitl_open":
        return Outcome()  # a link button: Slack opens the URL itself
    notification_id, interrupt_id, seen_round = _ids(
        str(action.get("block_id") or ""), str(action.get("value") or "")
    )
    response_url = payload.get("response_url")
    response_url = response_url if isinstance(response_url, str) else ""
    container = payload.get("container") if isinstance(payload.get("container"), dict) else {}
    updates.slack_message_learn(
        notification_id=notification_id,
        interrupt_id=interrupt_id,
        channel_id=str(container.get("channel_id") or ""),
        ts=str(container.get("message_ts") or ""),
        response_url=response_url,
    )
    user = hitl_user(payload)
    if user is None:
        updates.tell(
            response_url,
            "Your Slack account is not linked to a HITL user; ask an admin to link it "
            "(Admin → Slack account links), or open the item in HITL.",
        )
        return Outcome()
    try:
        if action_id in DECISIONS:
            decisions.interrupt_resolve(
                interrupt_id=interrupt_id,
                user=user,
                response_type=DECISIONS[action_id],
                grace=settings.HITL_UNDO_SECONDS,
                approval_round=seen_round,
                respect_claim=True,
                via="slack",
            )
        elif action_id == "hitl_undo":
            decisions.interrupt_undo(interrupt_id=interrupt_id, user=user)
        elif action_id == "hitl_respond":
            _open_modal(payload, notification_id, interrupt_id, container, response_url)
        else:
            raise BadRequest("Unknown action.")
    except errors.ServiceError as exc:
        updates.tell(response_url, exc.message)
    return Outcome()


def _open_modal(
    payload: dict[str, Any],
    notification_id: str,
    interrupt_id: str,
    container: dict[str, Any],
    response_url: str,
) -> None:
    row = HumanInterrupt.objects.filter(pk=interrupt_id).first()
    if row is None:
        raise errors.NotFound("No such interrupt.")
    if not settings.HITL_SLACK_BOT_TOKEN:
        raise errors.Invalid("Responding in Slack needs the app's bot token; open it in HITL.")
    metadata = {"n": notification_id, "i": interrupt_id, "r": response_url}
    summary = "\n".join(
        f"*{escape(name)}*: {escape(value)}" for name, value in args_summary(row.args)[:4]
    )
    view = {
        "type": "modal",
        "callback_id": RESPOND_CALLBACK,
        "private_metadata": json.dumps(metadata)[:3000],
        "title": {"type": "plain_text", "text": "Respond"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*{escape(action_label(row))}*" + (f"\n{summary}" if summary else ""),
                },
            },
            {
                "type": "input",
                "block_id": "answer",
                "label": {"type": "plain_text", "text": "Your answer (the agent gets it instead)"},
                "element": {"type": "plain_text_input", "action_id": "text", "multiline": True},
            },
        ],
    }
    try:
        updates.web_client().views_open(trigger_id=str(payload.get("trigger_id") or ""), view=view)
    except (SlackApiError, OSError, ValueError) as exc:
        log.warning("slack views.open failed: %s", exc)
        raise errors.Invalid("Slack did not open the form; try again or open it in HITL.") from None


def _view_submission(payload: dict[str, Any]) -> Outcome:
    view = payload.get("view") if isinstance(payload.get("view"), dict) else {}
    if view.get("callback_id") != RESPOND_CALLBACK:
        return Outcome()
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
        text = view["state"]["values"]["answer"]["text"]["value"]
    except (ValueError, KeyError, TypeError):
        raise BadRequest("Unreadable form.") from None
    if not isinstance(metadata, dict) or not isinstance(text, str):
        raise BadRequest("Unreadable form.")
    user = hitl_user(payload)
    if user is None:
        return _form_error("Your Slack account is not linked to a HITL user.")
    try:
        decisions.interrupt_resolve(
            interrupt_id=metadata.get("i"),
            user=user,
            response_type="response",
            args=text,
            grace=settings.HITL_UNDO_SECONDS,
            respect_claim=True,
            via="slack",
        )
    except errors.ServiceError as exc:
        return _form_error(exc.message)
    return Outcome()  # an empty 200 closes the modal


def _form_error(message: str) -> Outcome:
    return Outcome(body={"response_action": "errors", "errors": {"answer": message[:300]}})
