"""Reads for the reviewer web app: the inbox (keyset-paginated), a thread's conversation,
artifacts and final result, and the next item to open after a decision."""

from __future__ import annotations

import base64
import binascii
import logging
import mimetypes
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group
from django.db.models import Prefetch, Q, QuerySet, prefetch_related_objects

from agents.paths import FileAccessError
from hitl.core.access.permissions import user_can_review, user_can_review_all, user_group_ids
from hitl.core.decisions.claims import filter_claims, snoozed_by, snoozed_until
from hitl.core.errors import error_headline, without_paths
from hitl.core.files.storage import FilesUnavailable, thread_files, unavailable
from hitl.core.history.branches import Branch, Branches
from hitl.core.models import Artifact, HumanInterrupt, Run, Thread, ToolExecution
from hitl.core.registry import registry
from hitl.core.remote import state as remote_state
from hitl.core.runs.graphs import checkpointer
from hitl.review.rendering import csv_preview, markdown, pretty_json

log = logging.getLogger(__name__)

PAGE_SIZE = 25
INTERRUPT_TAB = "pending"
THREAD_TABS = ("all", "idle", "busy", "interrupted", "error", "done")
TABS = (INTERRUPT_TAB, *THREAD_TABS)


# --- inbox -----------------------------------------------------------------------------


@dataclass
class InboxQuery:
    tab: str = INTERRUPT_TAB
    group: int | None = None
    graph: str = ""
    clarification: str = ""
    mine: bool = False
    order: str = "newest"
    after: str = ""
    before: str = ""
    last: bool = False
    page_size: int = PAGE_SIZE
    claimed: str = ""  # "", "mine", "others", "unclaimed"
    snoozed: bool = False  # show the items I set aside ("not now") too


@dataclass
class InboxPage:
    items: list[Any]
    kind: str  # "interrupts" or "threads"
    next_cursor: str = ""
    prev_cursor: str = ""
    has_next: bool = False
    has_prev: bool = False
    cursor_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class BadCursor(ValueError):
    pass


def encode_cursor(ts: datetime, pk: Any) -> str:
    raw = f"{ts.isoformat()}|{pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        ts, _, pk = raw.partition("|")
        stamp = datetime.fromisoformat(ts)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor(token) from None
    if not pk or stamp.tzinfo is None:
        raise BadCursor(token)
    return stamp, pk


def _clarification_q(kind: str, prefix: str = "") -> Q:
    # ask_clarification puts the type in its args; other graphs use the value's
    # "clarification" extra key (kept in raw_value).
    return Q(**{f"{prefix}args__clarification_type": kind}) | Q(
        **{f"{prefix}raw_value__clarification__type": kind}
    )


def pending_interrupts_for(user, query: InboxQuery) -> QuerySet[HumanInterrupt]:
    qs = HumanInterrupt.objects.filter(status=HumanInterrupt.Status.PENDING)
    if query.mine or not user_can_review_all(user):
        qs = qs.filter(reviewer_group_id__in=user_group_ids(user))
    if query.group:
        qs = qs.filter(reviewer_group_id=query.group)
    if query.graph:
        qs = qs.filter(thread__graph=query.graph)
    if query.clarification:
        qs = qs.filter(_clarification_q(query.clarification))
    if query.claimed:
        qs = filter_claims(qs, query.claimed, user)
    if not query.snoozed:
        qs = qs.exclude(snoozed_by(user))
    else:  # the rows say which ones I set aside, and until when
        qs = qs.annotate(snoozed_until=snoozed_until(user))
    return qs


def threads_for(user, query: InboxQuery) -> QuerySet[Thread]:
    qs = Thread.objects.all()
    groups = user_group_ids(user)
    routed_to_groups = HumanInterrupt.objects.filter(reviewer_group_id__in=groups).values(
        "thread_id"
    )
    if query.mine or not user_can_review_all(user):
        # A subquery instead of a join keeps one row per thread without DISTINCT,
        # which would defeat the keyset index scan.
        qs = qs.filter(
            Q(requester_id=user.pk) | Q(reviewer_group_id__in=groups) | Q(pk__in=routed_to_groups)
        )
    if query.tab != "all":
        qs = qs.filter(status=query.tab)
    if query.group:
        qs = qs.filter(
            Q(reviewer_group_id=query.group)
            | Q(
                pk__in=HumanInterrupt.objects.filter(reviewer_group_id=query.group).values(
                    "thread_id"
                )
            )
        )
    if query.graph:
        qs = qs.filter(graph=query.graph)
    if query.clarification:
        qs = qs.filter(
            pk__in=HumanInterrupt.objects.filter(status=HumanInterrupt.Status.PENDING)
            .filter(_clarification_q(query.clarification))
            .values("thread_id")
        )
    return qs


def _keyset(qs: QuerySet, query: InboxQuery, ts_field: str) -> InboxPage:
    """One page by (timestamp, id): constant cost at any depth, unlike OFFSET."""
    newest = query.order != "oldest"
    desc = (f"-{ts_field}", "-pk")
    asc = (ts_field, "pk")
    forward = desc if newest else asc
    backward = asc if newest else desc
    page = InboxPage(items=[], kind="")
    reverse = False
    try:
        if query.before:
            ts, pk = decode_cursor(query.before)
            # Items that come before the cursor in display order, nearest first.
            cmp = "gt" if newest else "lt"
            qs = qs.filter(**{f"{ts_field}__{cmp}e": ts}).exclude(
                **{ts_field: ts, f"pk__{'lte' if newest else 'gte'}": pk}
            )
            qs, reverse = qs.order_by(*backward), True
        elif query.after:
            ts, pk = decode_cursor(query.after)
            cmp = "lt" if newest else "gt"
            qs = qs.filter(**{f"{ts_field}__{cmp}e": ts}).exclude(
                **{ts_field: ts, f"pk__{'gte' if newest else 'lte'}": pk}
            )
            qs = qs.order_by(*forward)
        elif query.last:
            qs, reverse = qs.order_by(*backward), True
        else:
            qs = qs.order_by(*forward)
    except BadCursor:
        page.cursor_error = True
        qs = qs.order_by(*forward)
        query.after = query.before = ""
        query.last = False
    rows = list(qs[: query.page_size + 1])
    more = len(rows) > query.page_size
    rows = rows[: query.page_size]
    if reverse:
        rows.reverse()
    page.items = rows
    if query.last:
        page.has_prev, page.has_next = more, False
    elif query.before:
        page.has_prev, page.has_next = more, True
    elif query.after:
        page.has_prev, page.has_next = True, more
    else:
        page.has_prev, page.has_next = False, more
    if rows:
        page.next_cursor = encode_cursor(getattr(rows[-1], ts_field), rows[-1].pk)
        page.prev_cursor = encode_cursor(getattr(rows[0], ts_field), rows[0].pk)
    if not rows and (query.before or query.after or query.last):
        page.has_prev = page.has_next = False
    return page


def inbox_page(user, query: InboxQuery) -> InboxPage:
    """A page of the inbox; a fixed number of queries whatever the page size or depth."""
    if query.tab == INTERRUPT_TAB:
        qs = pending_interrupts_for(user, query).select_related(
            "thread", "reviewer_group", "thread__requester", "claim__user"
        )
        page = _keyset(qs, query, "created_at")
        page.kind = "interrupts"
        return page
    pending = HumanInterrupt.objects.filter(status=HumanInterrupt.Status.PENDING).order_by(
        "created_at", "position"
    )
    qs = threads_for(user, query).select_related("reviewer_group", "requester")
    page = _keyset(qs, query, "updated_at")
    # One query for the pending items of every thread on the page (not one per row).
    prefetch_related_objects(
        page.items, Prefetch("interrupts", queryset=pending, to_attr="pending_items")
    )
    attach_failures(page.items)
    page.kind = "threads"
    return page


def attach_failures(threads: list[Thread]) -> None:
    """Set `failure` on each failed thread: its latest run's error in one line (one query
    for all of them)."""
    failed = {t.pk: t for t in threads if t.status == Thread.Status.ERROR}
    for thread in threads:
        thread.failure = ""
    if not failed:
        return
    errors = (
        Run.objects.filter(thread_id__in=failed, status=Run.Status.ERROR)
        .order_by("thread_id", "-created_at")
        .values_list("thread_id", "error")
    )
    for thread_id, error in errors:
        if not failed[thread_id].failure:
            failed[thread_id].failure = error_headline(error) or "The run failed."


def pending_count_for(user) -> int:
    return pending_interrupts_for(user, InboxQuery()).count()


def reviewer_groups_for_filter(user) -> list[Group]:
    if user_can_review_all(user):
        return list(Group.objects.order_by("name"))
    return list(Group.objects.filter(pk__in=user_group_ids(user)).order_by("name"))


def free_for(user, qs: QuerySet[HumanInterrupt]) -> QuerySet[HumanInterrupt]:
    """The items of `qs` this user may pick up next: none another reviewer has claimed,
    none the user set aside ("not now")."""
    return filter_claims(qs, "unclaimed_or_mine", user).exclude(snoozed_by(user))


def next_pending_for(user, after: HumanInterrupt | None = None) -> HumanInterrupt | None:
    """What to offer after deciding `after` (or for the "n" key): the same thread first,
    then further down the inbox; never an item someone else is on or the user set aside."""
    if after is None:
        return (
            free_for(user, pending_interrupts_for(user, InboxQuery()))
            .order_by("-created_at", "-pk")
            .first()
        )
    same_thread = free_for(
        user,
        HumanInterrupt.objects.filter(thread_id=after.thread_id, status="pending")
        .exclude(pk=after.pk)
        .select_related("thread")
        .in_order(),
    )
    for row in same_thread:
        if user_can_review(user, row):
            return row
    mine = free_for(user, pending_interrupts_for(user, InboxQuery())).exclude(
        thread_id=after.thread_id
    )
    older = mine.filter(created_at__lt=after.created_at).order_by("-created_at", "-pk").first()
    return older or mine.order_by("-created_at", "-pk").first()


# --- a thread --------------------------------------------------------------------------


def interrupt_clarification(row: HumanInterrupt) -> dict[str, Any] | None:
    """The clarification (type, question, options) an interrupt carries, if any."""
    extra = None
    raw = row.raw_value
    if isinstance(raw, list) and row.position < len(raw):
        raw = raw[row.position]
    if isinstance(raw, dict) and isinstance(raw.get("clarification"), dict):
        extra = dict(raw["clarification"])
    args = row.args if isinstance(row.args, dict) else {}
    if extra is None and row.action == "ask_clarification":
        extra = {}
    if extra is None:
        return None
    kind = extra.get("type") or args.get("clarification_type") or ""
    options = extra.get("options")
    if options is None:
        options = args.get("options")
    if not isinstance(options, list):
        options = []
    return {
        "type": str(kind),
        "question": str(extra.get("question") or args.get("question") or ""),
        "context": str(extra.get("context") or args.get("context") or ""),
        "options": [o if isinstance(o, str) else pretty_json(o) for o in options][:20],
        "accept_label": str(extra.get("accept_label") or "Accept"),
        # The built-in tool restates question and options in its description.
        "builtin": row.action == "ask_clarification",
    }


def interrupt_label(row: HumanInterrupt) -> str:
    """What an interrupt asks, in words: "which quarter should …?" or "send email"."""
    clarification = interrupt_clarification(row)
    if clarification and clarification["question"]:
        question = " ".join(clarification["question"].split())
        return f"“{question[:117] + '…' if len(question) > 120 else question}”"
    if row.action:
        return row.action.replace("_", " ").strip()
    return "the question"


@dataclass
class ChatMessage:
    role: str
    text: str = ""
    html: Any = ""
    name: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str = ""
    status: str = ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") in ("image", "image_url"):
                    parts.append("[image]")
        return "\n".join(parts)
    return "" if content is None else pretty_json(content)


def _message(raw: Any) -> ChatMessage:
    get = raw.get if isinstance(raw, dict) else (lambda k, d=None: getattr(raw, k, d))
    role = str(get("type") or get("role") or "message")
    role = {"user": "human", "assistant": "ai", "AIMessageChunk": "ai"}.get(role, role)
    text = _content_text(get("content"))
    tool_calls = [
        {
            "name": str(call.get("name", "")),
            "id": str(call.get("id") or ""),
            "args": pretty_json(call.get("args")),
        }
        for call in (get("tool_calls") or [])
        if isinstance(call, dict)
    ]
    return ChatMessage(
        role=role,
        text=text,
        html=markdown(text) if role in ("ai", "human", "system") else "",
        name=str(get("name") or ""),
        tool_calls=tool_calls,
        tool_call_id=str(get("tool_call_id") or ""),
        status=str(get("status") or ""),
    )


@dataclass
class Conversation:
    messages: list[ChatMessage] = field(default_factory=list)
    state: str = ""  # the state as JSON when the graph keeps no messages
    error: str = ""
    # The files the current state presents (its `artifacts` key), None without that key
    artifact_paths: list[str] | None = None


def thread_conversation(thread: Thread, *, limit: int = 200) -> Conversation:
    """The thread's messages (and tool calls) from its LangGraph checkpoint."""
    try:
        link = remote_state.remote_link(thread)
        if link is not None:  # a thread of another deployment: its state is there
            values = remote_state.remote_values(link)
        else:
            graph = registry.get(thread.graph, checkpointer())
            snapshot = graph.get_state({"configurable": {"thread_id": str(thread.pk)}})
            values = snapshot.values if isinstance(snapshot.values, dict) else {}
    except Exception as exc:  # the page must render even when the checkpoint is unreadable
        log.warning("cannot read the checkpoint of thread %s: %s", thread.pk, exc)
        return Conversation(error="The conversation cannot be read right now.")
    presented = values.get("artifacts")
    paths = [str(p) for p in presented] if isinstance(presented, list) else None
    messages = values.get("messages")
    if isinstance(messages, list):
        return Conversation(messages=[_message(m) for m in messages[-limit:]], artifact_paths=paths)
    shown = {k: v for k, v in values.items() if k not in ("artifacts",)}
    return Conversation(state=pretty_json(shown) if shown else "", artifact_paths=paths)


def thread_final_result(thread: Thread) -> Run | None:
    return (
        thread.runs.filter(final_result__isnull=False)
        .exclude(status=Run.Status.CANCELLED)
        .order_by("-created_at")
        .first()
    )


@dataclass
class FailedAction:
    """An approved tool call that reported failure (see agents/tools/approval.py)."""

    tool: str
    message: str
    started_at: datetime
    approved_by: str = ""
    decision: str = ""


def thread_failed_actions(thread: Thread) -> list[FailedAction]:
    """Approved calls on the thread whose tool failed, oldest first."""
    executions = list(
        ToolExecution.objects.filter(thread=thread, result__status="error").order_by("started_at")
    )
    if not executions:
        return []
    decisions = {
        row.interrupt_id: row
        for row in HumanInterrupt.objects.filter(
            thread=thread, interrupt_id__in={e.interrupt_id for e in executions}
        ).select_related("responded_by")
    }
    failed = []
    for execution in executions:
        row = decisions.get(execution.interrupt_id)
        failed.append(
            FailedAction(
                tool=execution.tool.replace("_", " "),
                message=without_paths(str((execution.result or {}).get("content") or ""))[:2000],
                started_at=execution.started_at,
                approved_by=row.responded_by.get_username() if row and row.responded_by else "",
                decision=row.response_type if row else "",
            )
        )
    return failed


def mark_failed_actions(runs: list[Run], failed: list[FailedAction]) -> None:
    """Set `run.failed_actions`: the failed approved calls made while each run ran."""
    for run in runs:
        start = run.started_at or run.created_at
        run.failed_actions = [
            f
            for f in failed
            if f.started_at >= start
            and (run.finished_at is None or f.started_at <= run.finished_at)
        ]


# Only raster images are previewed inline; SVG can carry script.
INLINE_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
TEXT_TYPES = {"text/plain", "text/markdown", "application/json", "text/x-python"}
PREVIEW_BYTES = 64 * 1024


def artifact_mime(artifact: Artifact) -> str:
    guessed, _ = mimetypes.guess_type(artifact.path)
    return (artifact.mime or guessed or "application/octet-stream").split(";")[0].strip().lower()


def artifact_open(artifact: Artifact):
    """Open an artifact's bytes from the thread's storage, or None when it is gone.

    Raises FilesUnavailable when the store failed (the file may well be there).
    """
    try:
        # The storage layer validates the virtual path (no "..", no other thread's files).
        return thread_files(artifact.thread_id).open(artifact.path)
    except (FileAccessError, FileNotFoundError):
        return None
    except OSError as exc:
        raise unavailable(exc) from None


def artifact_preview_bytes(artifact: Artifact) -> bytes | None:
    """The first PREVIEW_BYTES of an artifact (None when it is gone); FilesUnavailable
    when the store failed."""
    handle = artifact_open(artifact)
    if handle is None:
        return None
    try:
        with handle:
            return handle.read(PREVIEW_BYTES)
    except OSError as exc:
        raise unavailable(exc) from None


@dataclass
class ArtifactView:
    artifact: Artifact
    mime: str
    kind: str  # image | csv | text | file
    name: str
    missing: bool = False
    unreadable: bool = False  # the store failed just now
    text: str = ""
    table: dict[str, Any] | None = None
    branch: Branch | None = None


def split_by_branch(
    views: list[ArtifactView], branches: Branches, current_paths: list[str] | None
) -> tuple[list[ArtifactView], list[ArtifactView]]:
    """(files of the current branch, files of other branches), each labelled with its
    branch. The current state's `artifacts` says what the current branch presents (a
    fork copies the files of the step it started from); the rest belong to the branch
    that was running when they were registered."""
    if not branches.many:
        return views, []
    current, other = [], []
    for view in views:
        if current_paths is not None and view.artifact.path in current_paths:
            view.branch = branches.current
        else:
            view.branch = branches.at(view.artifact.created_at) or branches.current
        (current if view.branch == branches.current else other).append(view)
    return current, other


def thread_artifacts(thread: Thread) -> list[ArtifactView]:
    views = []
    for artifact in thread.artifacts.order_by("created_at", "path"):
        mime = artifact_mime(artifact)
        name = artifact.path.rsplit("/", 1)[-1]
        if mime in INLINE_IMAGE_TYPES:
            kind = "image"
        elif mime == "text/csv" or name.lower().endswith(".csv"):
            kind = "csv"
        elif mime in TEXT_TYPES or mime.startswith("text/") and mime not in ("text/html",):
            kind = "text"
        else:
            kind = "file"
        view = ArtifactView(artifact=artifact, mime=mime, kind=kind, name=name)
        if kind in ("csv", "text"):
            try:
                data = artifact_preview_bytes(artifact)
            except FilesUnavailable:
                view.unreadable = True
            else:
                if data is None:
                    view.missing = True
                elif kind == "csv":
                    view.table = csv_preview(data)
                else:
                    view.text = data.decode("utf-8", errors="replace")
        views.append(view)
    return views
