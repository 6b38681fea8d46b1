"""Server-rendered pages: the inbox, a thread, decisions, and artifact downloads."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import FileResponse, Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from hitl.core import decisions, errors, runs
from hitl.core.access.permissions import (
    user_can_review,
    user_can_review_all,
    user_can_view_thread,
    user_group_ids,
)
from hitl.core.db import snapshot
from hitl.core.decisions.rule_stats import dry_run_opinions
from hitl.core.files.storage import FilesUnavailable, download_headers
from hitl.core.live import listeners
from hitl.core.models import Artifact, HumanInterrupt, Thread
from hitl.review import fragments as partials
from hitl.review.batch import batch_of, item_label
from hitl.review.forms import DecisionForm, InboxFilterForm
from hitl.review.selectors import (
    INLINE_IMAGE_TYPES,
    TABS,
    THREAD_TABS,
    artifact_mime,
    artifact_open,
    inbox_page,
    interrupt_label,
    next_pending_for,
    pending_count_for,
    reviewer_groups_for_filter,
)
from hitl.review.start_form import StartThreadForm


def _is_reviewer(user) -> bool:
    return user_can_review_all(user) or bool(user_group_ids(user))


@login_required
@require_GET
def inbox(request):
    groups = reviewer_groups_for_filter(request.user)
    default_tab = "pending" if _is_reviewer(request.user) else "all"
    filters = InboxFilterForm(request.GET, groups=groups, default_tab=default_tab)
    query = filters.query()
    page = inbox_page(request.user, query)
    if page.cursor_error:
        messages.warning(request, "That page link is no longer valid; showing the first page.")
    base = {
        k: v
        for k, v in {
            "tab": query.tab,
            "group": query.group or "",
            "graph": query.graph,
            "clarification": query.clarification,
            "mine": "1" if query.mine else "",
            "claimed": query.claimed,
            "snoozed": "1" if query.snoozed else "",
            "order": query.order if query.order != "newest" else "",
        }.items()
        if v
    }

    def link(**extra) -> str:
        return "?" + urlencode({**base, **extra})

    context = {
        "filters": filters,
        "query": query,
        "page": page,
        "tabs": [(t, "?" + urlencode({**base, "tab": t})) for t in TABS],
        "thread_tabs": THREAD_TABS,
        "pending_count": pending_count_for(request.user),
        "first_url": link(),
        "next_url": link(after=page.next_cursor) if page.has_next else "",
        "prev_url": link(before=page.prev_cursor) if page.has_prev else "",
        "last_url": link(last="1"),
        "first_page": not (query.after or query.before or query.last),
        "is_reviewer": _is_reviewer(request.user),
        "my_groups": sorted(user_group_ids(request.user)),
    }
    if request.GET.get("partial"):
        return render(request, "hitl/partials/inbox_list.html", context)
    return render(request, "hitl/inbox.html", context)


@login_required
def thread_new(request):
    """Start a thread from a form built from the graph's input schema (or raw JSON)."""
    form = StartThreadForm(
        request.POST if request.method == "POST" else None, graph=request.GET.get("graph")
    )
    if request.method == "POST" and form.is_valid():
        try:
            # The run is sent once this commits: by then its thread counts as watched,
            # so the worker streams its events for the page the browser opens next.
            with transaction.atomic():
                run = runs.run_start(
                    graph=form.cleaned_data["graph"],
                    input=form.start_input(),
                    title=form.cleaned_data["title"],
                    user=request.user,
                )
                listeners.expect_listener(run.thread_id)
        except errors.ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            # The thread page follows this run until it pauses or ends (progress.js).
            request.session["hitl_follow"] = str(run.thread_id)
            return redirect("thread", thread_id=run.thread_id)
    status = 400 if request.method == "POST" else 200
    if request.GET.get("partial"):
        return render(request, "hitl/partials/start_fields.html", {"form": form})
    return render(request, "hitl/thread_new.html", {"form": form}, status=status)


def _thread_or_404(request, thread_id) -> Thread:
    thread = (
        Thread.objects.filter(pk=thread_id)
        .select_related("requester", "reviewer_group")
        .one_or_none()
    )
    if thread is None or not user_can_view_thread(request.user, thread):
        raise Http404("No such thread.")
    return thread


def _render_thread(request, thread: Thread, *, failed=None, lost=None, status: int = 200):
    """The thread page; `failed` is (interrupt, bound form, error) to show inline, `lost`
    (decided interrupt, what the reviewer had typed) when someone else answered first."""
    cards = []
    rows = list(partials.thread_pending_interrupts(thread))
    opinions = dry_run_opinions(rows)
    restored = _take_restored(request, rows)
    for row in rows:
        extra = {}
        if failed and failed[0].pk == row.pk:
            extra = {"form": failed[1], "error": failed[2]}
        elif row.pk in restored:
            extra = {"form": DecisionForm(restored[row.pk], interrupt=row), "restored": True}
        context = partials.interrupt_context(
            row,
            can_answer=user_can_review(request.user, row),
            user=request.user,
            opinions=opinions[row.pk],
            **extra,
        )
        cards.append(context)
    context = partials.thread_context(thread, request.user)
    context["cards"] = cards
    context["follow"] = request.session.pop("hitl_follow", None) == str(thread.pk)
    offered = request.session.pop("hitl_next", None)
    if isinstance(offered, dict) and offered.get("after") == str(thread.pk):
        context["next_item"] = offered
    if lost:
        context["lost"] = {**partials.outcome_context(lost[0]), "typed": lost[1]}
    return render(request, "hitl/thread.html", context, status=status)


@login_required
@require_GET
def thread_detail(request, thread_id):
    return _render_thread(request, _thread_or_404(request, thread_id))


@login_required
@require_GET
def thread_live(request, thread_id):
    """Every live section of a thread page, for a page that reconnects after a drop."""
    with snapshot.one_moment():  # the status, the sections and the cards agree
        thread = _thread_or_404(request, thread_id)
        cards = partials.thread_interrupt_cards(thread, request.user, request=request)
        sections = partials.thread_sections(thread, request.user, request=request)
    return JsonResponse(
        {
            "status": thread.status,
            "sections": sections,
            "interrupts": [{"id": str(row.pk), "html": html} for row, html in cards],
        }
    )


@login_required
@require_GET
def thread_status(request, thread_id):
    thread = _thread_or_404(request, thread_id)
    return JsonResponse({"status": thread.status, "pending": thread.interrupts.pending().count()})


def _wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _decidable_row(request, interrupt_id) -> HumanInterrupt:
    """The interrupt a reviewer or the thread's viewer acts on; 404 for anyone else."""
    row = (
        HumanInterrupt.objects.filter(pk=interrupt_id)
        .select_related("thread", "reviewer_group")
        .first()
    )
    if row is None or not (
        user_can_review(request.user, row) or user_can_view_thread(request.user, row.thread)
    ):
        raise Http404("No such interrupt.")
    return row


@login_required
@require_POST
def interrupt_decide(request, interrupt_id):
    """Record a decision from a card's form (or, as JSON, from the inbox's quick keys)."""
    row = _decidable_row(request, interrupt_id)
    thread_url = reverse("thread", args=[row.thread_id])
    as_json = _wants_json(request)
    form = DecisionForm(request.POST, interrupt=row)
    if not form.is_valid() and row.status == HumanInterrupt.Status.PENDING:
        error = "; ".join(form.non_field_errors()) or "Fix the highlighted fields."
        if as_json:
            return JsonResponse({"error": error, "fields": form.errors}, status=400)
        return _render_thread(request, row.thread, failed=(row, form, error), status=400)
    # A decided row goes to the service whatever the form says: it names who answered.
    response_type, args = form.decision() if form.is_valid() else ("accept", None)
    unsent = form.unsent_edit() if response_type == "accept" else {}
    try:
        answer = decisions.interrupt_resolve(
            interrupt_id=row.pk,
            user=request.user,
            response_type=response_type,
            args=args,
            grace=settings.HITL_UNDO_SECONDS,
            approval_round=_approval_round(request),
        )
    except errors.ServiceError as exc:
        if as_json:
            return JsonResponse({"error": exc.message}, status=exc.status_code)
        if isinstance(exc, errors.Invalid):
            return _render_thread(request, row.thread, failed=(row, form, exc.message), status=400)
        row.refresh_from_db()
        if row.status != HumanInterrupt.Status.PENDING and row.responded_by_id not in (
            None,
            request.user.pk,
        ):
            # Lost a race: show what won, and hand back what this reviewer typed.
            return _render_thread(
                request, row.thread, lost=(row, form.submitted()), status=exc.status_code
            )
        messages.error(request, exc.message)
        if isinstance(exc, errors.Forbidden):
            # Not routed to this user (a requester watching their thread): a real 403.
            return _render_thread(request, row.thread, status=403)
        # No longer pending.
        return redirect(thread_url)
    following = next_pending_for(request.user, row)
    batch = batch_of(row)
    label = {"response": "Answer sent", "edit": "Edited and approved", "accept": "Approved"}
    named = f"{item_label(row, batch)} on “{row.thread.title or row.thread_id}”"
    done = f"{label.get(response_type, 'Ignored')}: {named}"
    if len(batch) > 1 and following is not None and following.thread_id != row.thread_id:
        done += f"; all {len(batch)} answered, the agent resumes"
    progress = answer.progress
    if progress is not None:  # four-eyes: still pending until the quorum is met
        done = f"Approval recorded ({progress.approvals} of {progress.required} approvals): {named}"
    undo = undo_info(answer.row)
    if unsent:
        # Accepted as proposed over a typed edit: keep the edit for Undo to give back.
        _keep_unsent(request, row, unsent if undo else None)
        done += (
            "; your typed edit was not sent (Undo gives it back)"
            if undo
            else "; your typed edit was not sent"
        )
    # The page stays on this thread (its agent resumes here); another thread's item is
    # only offered as a link, never opened: a decision acts on what the reviewer has seen.
    stay = thread_url
    if following is not None and following.thread_id == row.thread_id:
        stay += f"#interrupt-{following.pk}"
    offered = following if following is not None and following.thread_id != row.thread_id else None
    if as_json:
        return JsonResponse(
            {
                "ok": True,
                "next": _next_href(offered) if offered else stay,
                "message": _sentence(done),
                "undo": undo,
            }
        )
    if offered is not None and len(batch) < 2:  # a batch's own line links the next item
        request.session["hitl_next"] = {
            "href": _next_href(offered),
            "label": interrupt_label(offered),
            "thread": offered.thread.title or str(offered.thread_id),
            "after": str(row.thread_id),
        }
    tags = f"undo undo-{answer.row.pk}-{undo['until_ms']}" if undo else ""
    messages.success(request, _sentence(done), extra_tags=tags)
    return redirect(stay)


UNSENT_KEPT = 10  # typed edits kept per session for Undo (the newest)


def _keep_unsent(request, row: HumanInterrupt, data: dict | None) -> None:
    """Remember (or forget, with None) the edit a reviewer typed but did not send."""
    kept = {k: v for k, v in request.session.get("hitl_unsent", {}).items() if k != str(row.pk)}
    if data is not None:
        kept[str(row.pk)] = data
    request.session["hitl_unsent"] = dict(list(kept.items())[-UNSENT_KEPT:])


def _take_restored(request, rows: list[HumanInterrupt]) -> dict:
    """The typed edits Undo gave back for these pending rows, taken out of the session."""
    restored = request.session.get("hitl_restore") or {}
    if not restored:
        return {}
    found = {row.pk: restored.pop(str(row.pk)) for row in rows if str(row.pk) in restored}
    request.session["hitl_restore"] = restored
    return found


def _next_href(row: HumanInterrupt) -> str:
    return reverse("thread", args=[row.thread_id]) + f"#interrupt-{row.pk}"


def _approval_round(request) -> int | None:
    """The four-eyes round the card was rendered with (None when it did not say)."""
    value = request.POST.get("approval_round", "")
    return int(value) if value.isdigit() and len(value) < 10 else None


def undo_info(row: HumanInterrupt) -> dict | None:
    """Where and until when a decision under its grace period can be undone."""
    if row.undo_until is None:
        return None
    return {
        "url": reverse("interrupt-undo", args=[row.pk]),
        "until_ms": int(row.undo_until.timestamp() * 1000),
        "seconds": max(0.0, (row.undo_until - timezone.now()).total_seconds()),
    }


@login_required
@require_POST
def interrupt_undo(request, interrupt_id):
    """Take back one's own decision while its grace period lasts."""
    row = _decidable_row(request, interrupt_id)
    as_json = _wants_json(request)
    try:
        decisions.interrupt_undo(interrupt_id=row.pk, user=request.user)
    except errors.ServiceError as exc:
        if as_json:
            return JsonResponse({"error": exc.message}, status=exc.status_code)
        messages.error(request, exc.message)
        return _render_thread(request, row.thread, status=exc.status_code)
    text = f"Undone: {interrupt_label(row)} is waiting for a decision again."
    unsent = request.session.get("hitl_unsent", {}).get(str(row.pk))
    if unsent:
        _keep_unsent(request, row, None)
        request.session["hitl_restore"] = {
            **(request.session.get("hitl_restore") or {}),
            str(row.pk): unsent,
        }
        text += " Your typed edit is back in the card: nothing of it was sent."
    if as_json:
        return JsonResponse({"ok": True, "message": text})
    messages.success(request, text)
    return redirect(reverse("thread", args=[row.thread_id]) + f"#interrupt-{row.pk}")


def _sentence(text: str) -> str:
    return text if text.endswith(("”", ".", "?", "!")) else text + "."


@login_required
@require_GET
def interrupt_outcome(request, interrupt_id):
    """How a decided interrupt was answered (who, which decision, the final args), as HTML
    for a page whose card was answered by someone else."""
    row = (
        HumanInterrupt.objects.filter(pk=interrupt_id)
        .select_related("thread", "reviewer_group", "responded_by")
        .first()
    )
    if row is None or not (
        user_can_review(request.user, row) or user_can_view_thread(request.user, row.thread)
    ):
        raise Http404("No such interrupt.")
    if row.status == HumanInterrupt.Status.PENDING:
        return HttpResponse("Not decided yet.", status=409, content_type="text/plain")
    return render(request, "hitl/partials/interrupt_outcome.html", partials.outcome_context(row))


@login_required
@require_GET
def interrupt_next(request):
    """Open the newest pending item routed to the user (the "n" key)."""
    row = next_pending_for(request.user)
    if row is None:
        messages.info(request, "Nothing waits for you.")
        return redirect("home")
    return redirect(reverse("thread", args=[row.thread_id]) + f"#interrupt-{row.pk}")


@login_required
@require_POST
def thread_cancel(request, thread_id):
    thread = _thread_or_404(request, thread_id)
    try:
        runs.thread_cancel(thread=thread, user=request.user)
    except errors.ServiceError as exc:
        messages.error(request, exc.message)
        if isinstance(exc, errors.Forbidden):
            return _render_thread(request, thread, status=403)
    else:
        messages.success(request, "Thread cancelled.")
    return redirect("thread", thread_id=thread.pk)


@login_required
@require_GET
def artifact_download(request, thread_id, artifact_id):
    """Serve a thread's file to those who may see the thread.

    Only raster images are ever shown inline; everything else (HTML and SVG above
    all) is an attachment, and nosniff stops browsers from guessing otherwise.
    """
    thread = _thread_or_404(request, thread_id)
    artifact = Artifact.objects.filter(pk=artifact_id, thread=thread).first()
    if artifact is None:
        raise Http404("No such file.")
    try:
        handle = artifact_open(artifact)
    except FilesUnavailable as exc:
        return HttpResponse(exc.message, status=503, content_type="text/plain")
    if handle is None:
        return HttpResponse(
            "The file is no longer in storage.", status=410, content_type="text/plain"
        )
    mime = artifact_mime(artifact)
    name = artifact.path.rsplit("/", 1)[-1]
    inline = request.GET.get("inline") == "1" and mime in INLINE_IMAGE_TYPES
    if mime not in INLINE_IMAGE_TYPES and not mime.startswith("text/"):
        mime = "application/octet-stream"
    elif mime.startswith("text/"):
        mime = "text/plain; charset=utf-8"
    response = FileResponse(handle, content_type=mime)
    response["Content-Disposition"] = content_disposition_header(not inline, name)
    download_headers(response, handle)
    response["Cache-Control"] = "private, max-age=300"
    return response
