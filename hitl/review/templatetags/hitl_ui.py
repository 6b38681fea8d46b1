"""Small template filters for the reviewer web app."""

import hashlib
import html
import json
import time

import nh3
from django import template
from django.conf import settings
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.timesince import timesince

from hitl.core.decisions.quorum import current_args
from hitl.core.errors import error_headline
from hitl.review.rendering import markdown, peek_args
from hitl.review.selectors import interrupt_clarification, interrupt_label

register = template.Library()


@register.filter
def words(value) -> str:
    """snake_case to words: approach_choice -> approach choice."""
    return str(value or "").replace("_", " ").strip()


@register.filter
def size(value) -> str:
    return filesizeformat(value or 0)


@register.filter
def duration(run) -> str:
    """A run's wall time, short."""
    delta = getattr(run, "duration", None)
    if delta is None:
        return ""
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.0f} min"


@register.filter
def plain(value) -> str:
    """Agent markdown as one line of plain text, for list summaries (escaped on output)."""
    text = nh3.clean(str(markdown(value)), tags=set())
    return " ".join(html.unescape(text).split())


@register.filter
def ago(value) -> str:
    """'just now', '5 minutes ago', '2 hours ago'."""
    if not value:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return timesince(value, depth=1) + " ago"


@register.filter
def clarification_of(row):
    """The clarification an interrupt carries (type, question, options), or None."""
    return interrupt_clarification(row)


@register.simple_tag
def default_reviewer_group() -> str:
    """The group that reviews what no other group is named for."""
    return settings.HITL_DEFAULT_REVIEWER_GROUP


@register.filter
def headline(error) -> str:
    """A stored traceback as its exception type and message."""
    return error_headline(str(error or ""))


@register.filter
def action_words(row) -> str:
    """What an interrupt asks, in words: the question, or the action without underscores."""
    return interrupt_label(row)


@register.filter
def undo_of(message) -> dict | None:
    """The undo a flash message offers ({id, seconds}), from its `undo-<id>-<ms>` tag."""
    for tag in str(getattr(message, "extra_tags", "") or "").split():
        if tag.startswith("undo-"):
            pk, _, until_ms = tag[5:].rpartition("-")
            if not until_ms.isdigit():
                return None
            seconds = max(0.0, int(until_ms) / 1000 - time.time())
            return {"id": pk, "seconds": f"{seconds:.2f}"}
    return None


@register.filter
def a_type(kind) -> str:
    """A JSON type with its article: 'an object', 'a string'."""
    kind = str(kind or "value")
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


@register.filter
def arg_peek(row):
    """The two or three args an inbox row shows, and what it leaves unseen."""
    return peek_args(row.args, row.args_schema)


@register.filter
def args_digest(row) -> str:
    """A short fingerprint of the args a card shows (and of its four-eyes round): a draft
    typed over other args is never put back."""
    text = json.dumps([current_args(row), row.approval_round], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


DECISION_VERBS = {
    "accept": "accepted",
    "edit": "edited",
    "response": "answered",
    "ignore": "skipped",
}


@register.filter
def decision_verb(response_type, status="") -> str:
    """A decision as a past-tense verb ('accepted'), or the row's status without one."""
    return DECISION_VERBS.get(str(response_type or ""), str(status or response_type or ""))
