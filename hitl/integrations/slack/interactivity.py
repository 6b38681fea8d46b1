"""Slack's interactivity requests: verify them, find the HITL user, decide as the browser does.

A request counts only when Slack's signature over `v0:{timestamp}:{body}` checks out with
the app's signing secret (slack_sdk's SignatureVerifier, which also refuses timestamps
more than five minutes off) and that signature was never accepted before (a replay).
Headers and body are checked for shape first, and a signed payload is read strictly
(bounded JSON, no NUL or lone surrogates, the fields we use of the types Slack sends):
what cannot be read is a 400 and leaves nothing behind.
The presser is mapped to a HITL user by an explicit SlackUserLink (admin), or, when
HITL_SLACK_MATCH_EMAIL is on and the payload carries an e-mail, by that e-mail (SSO keeps
only addresses the identity provider verified, hitl/core/access/sso.py).
Decisions go through `interrupt_resolve` with the browser's grace period and claims
respected, so permissions, four-eyes, undo and the audit trail are the browser's.
"""

from __future__ import annotations

import json
import logging
import re
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
from hitl.core.decisions.claims import ClaimHeld
from hitl.core.models import HumanInterrupt, SlackRequestSeen, SlackUserLink
from hitl.integrations.slack import transport, updates
from hitl.integrations.slack.messages import escape

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


# Slack's timestamp is Unix seconds in ASCII digits; str.isdigit() would also pass "²"
# (which int() refuses) and a 400-digit number. Shapes are checked before slack_sdk's
# verifier, which parses the timestamp and decodes the body before it compares anything.
TIMESTAMP = re.compile(r"[0-9]{1,12}")
SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
# An id Slack sends (user, team, channel, trigger, ts) is short; a URL or address bounded.
ID_MAX = 255
URL_MAX = 2048


def check_shape(body: bytes, timestamp: str, signature: str) -> None:
    """Refuse what Slack never sends: missing headers (401), unreadable ones or body (400)."""
    if not timestamp or not signature:
        raise Refused("Missing Slack signature headers.")
    if not TIMESTAMP.fullmatch(timestamp):
        raise BadRequest("X-Slack-Request-Timestamp must be Unix seconds in ASCII digits.")
    if not SIGNATURE.fullmatch(signature):
        raise BadRequest("X-Slack-Signature must be v0= and 64 hexadecimal digits.")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("The body is not UTF-8.") from None


def verify(body: bytes, timestamp: str, signature: str) -> None:
    """Raise Refused unless Slack signed this body recently (headers already well-formed)."""
    secret = settings.HITL_SLACK_SIGNING_SECRET
    if not secret or not SignatureVerifier(secret).is_valid(body, timestamp, signature):
        raise Refused("Invalid or stale Slack signature.")


def remember(signature: str) -> None:
    """Raise Refused if this signature was accepted before (a replay); else remember it."""
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


def forget(signature: str) -> None:
    """Drop a remembered signature: its request turned out unreadable and did nothing."""
    SlackRequestSeen.objects.filter(signature=signature[:100]).delete()


def parse(body: bytes) -> dict[str, Any]:
    """The payload object: bounded JSON without NUL or lone surrogates anywhere in it."""
    try:
        form = parse_qs(body.decode(), strict_parsing=True, max_num_fields=10, errors="strict")
        raw = form["payload"][0]
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        raise BadRequest("Expected a form-encoded payload= with a JSON object.") from None
    try:
        # Checked whole, once: every value read later can reach the database as it is.
        payload = errors.load_json(raw, "payload")
    except errors.Invalid as exc:
        raise BadRequest(exc.message) from None
    if not isinstance(payload, dict):
        raise BadRequest("Expected a form-encoded payload= with a JSON object.")
    return payload


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"payload {where}{key} must be an object.")
    return value


def _text(parent: dict[str, Any], key: str, where: str, limit: int = ID_MAX) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise BadRequest(f"payload {where}{key} must be a string of at most {limit} characters.")
    return value


def hitl_user(payload: dict[str, Any]):
    """The HITL user behind the Slack user who pressed, or None."""
    slack_user = _object(payload, "user", "")
    slack_id = _text(slack_user, "id", "user.")
    team_id = _text(_object(payload, "team", ""), "id", "team.") or _text(
        slack_user, "team_id", "user."
    )
    if slack_id:
        link = (
            SlackUserLink.objects.filter(slack_user_id=slack_id, team_id__in=[team_id, ""])
            .select_related("user")
            .order_by("-team_id")  # a workspace-specific link wins over a global one
            .first()
        )
        if link is not None:
            return link.user if link.user.is_active else None
    address = _text(slack_user, "email", "user.", 254)
    if settings.HITL_SLACK_MATCH_EMAIL and "@" in address:
        found = list(get_user_model().objects.filter(is_active=True, email__iexact=address)[:2])
        if len(found) == 1:  # an address two accounts share names nobody
            return found[0]
    return None


UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
BLOCK_ID = re.compile(f"hitl:({UUID}):({UUID})")  # notification id, interrupt id
BUTTON_VALUE = re.compile(f"({UUID}):([0-9]{{1,9}})")  # interrupt id, four-eyes round


def _ids(block_id: str, value: str) -> tuple[str, str, int]:
    """(notification id, interrupt id, four-eyes round) from one of our buttons."""
    block = BLOCK_ID.fullmatch(block_id)
    button = BUTTON_VALUE.fullmatch(value)
    if block is None or button is None or button.group(1) != block.group(2):
        raise BadRequest("Not a HITL button.")
    return block.group(1), block.group(2), int(button.group(2))


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
    action_id = _text(action, "action_id", "actions[0].")
    if action_id == "hitl_open":
        return Outcome()  # a link button: Slack opens the URL itself
    if action_id not in (*DECISIONS, "hitl_undo", "hitl_respond"):
        raise BadRequest("Unknown action.")
    notification_id, interrupt_id, seen_round = _ids(
        _text(action, "block_id", "actions[0]."), _text(action, "value", "actions[0].")
    )
    response_url = _text(payload, "response_url", "", URL_MAX)
    container = _object(payload, "container", "")
    channel_id = _text(container, "channel_id", "container.")
    message_ts = _text(container, "message_ts", "container.")
    trigger_id = _text(payload, "trigger_id", "")
    user = hitl_user(payload)  # reads (and refuses) the presser's fields before any write
    updates.slack_message_learn(
        notification_id=notification_id,
        interrupt_id=interrupt_id,
        channel_id=channel_id,
        ts=message_ts,
        response_url=response_url,
    )
    if user is None:
        transport.tell(
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
            # The form shows the item's args: only for someone who may answer it now.
            row = decisions.interrupt_answer_check(
                interrupt_id=interrupt_id, user=user, response_type="response", respect_claim=True
            )
            _open_modal(row, trigger_id, notification_id, response_url)
    except errors.ServiceError as exc:
        transport.tell(response_url, _refusal_text(exc))
    return Outcome()


def _refusal_text(exc: errors.ServiceError) -> str:
    """What a refusal says in Slack: a claim in words a button-presser can act on."""
    if isinstance(exc, ClaimHeld):
        return (
            f"Not decided: {exc.holder} is on it (until {exc.until:%H:%M} UTC). "
            "Open the item in HITL to decide all the same."
        )
    return exc.message


def _open_modal(
    row: HumanInterrupt, trigger_id: str, notification_id: str, response_url: str
) -> None:
    if not settings.HITL_SLACK_BOT_TOKEN:
        raise errors.Invalid("Responding in Slack needs the app's bot token; open it in HITL.")
    metadata = {"n": notification_id, "i": str(row.pk), "r": response_url}
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
        transport.web_client().views_open(trigger_id=trigger_id, view=view)
    except (SlackApiError, OSError, ValueError) as exc:
        log.warning("slack views.open failed: %s", exc)
        raise errors.Invalid("Slack did not open the form; try again or open it in HITL.") from None


def _view_submission(payload: dict[str, Any]) -> Outcome:
    view = _object(payload, "view", "")
    if view.get("callback_id") != RESPOND_CALLBACK:
        return Outcome()
    try:
        metadata = errors.load_json(_text(view, "private_metadata", "view.", 3000) or "{}")
        text = view["state"]["values"]["answer"]["text"]["value"]
    except (errors.Invalid, KeyError, TypeError):
        raise BadRequest("Unreadable form.") from None
    if not isinstance(metadata, dict) or not isinstance(text, str):
        raise BadRequest("Unreadable form.")
    interrupt_id = _text(metadata, "i", "view.private_metadata.")
    user = hitl_user(payload)
    if user is None:
        return _form_error("Your Slack account is not linked to a HITL user.")
    try:
        decisions.interrupt_resolve(
            interrupt_id=interrupt_id,
            user=user,
            response_type="response",
            args=text,
            grace=settings.HITL_UNDO_SECONDS,
            respect_claim=True,
            via="slack",
        )
    except errors.ServiceError as exc:
        return _form_error(_refusal_text(exc))
    return Outcome()  # an empty 200 closes the modal


def _form_error(message: str) -> Outcome:
    return Outcome(body={"response_action": "errors", "errors": {"answer": message[:300]}})
