"""JSON API (v1): start runs, read threads and their pending interrupts, decide.

Auth: an API token (`Authorization: Bearer …` or `X-Api-Key: …`) or the browser
session (with CSRF). Every error is a JSON body {"detail": "..."} with a 4xx status.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import File, NinjaAPI, Schema, Status, UploadedFile
from ninja.errors import ValidationError
from ninja.security import SessionAuth

from hitl.api.errors import BoundedParser, Error, install_error_handlers
from hitl.api.tokens import TokenBearer, TokenHeader
from hitl.core import decisions, errors, runs
from hitl.core.access.permissions import (
    interrupt_list_for_reviewer,
    thread_pending_interrupts,
    user_can_review,
    user_can_view_thread,
)
from hitl.core.decisions import quorum
from hitl.core.errors import error_headline
from hitl.core.files import storage
from hitl.core.files.artifacts import artifact_json
from hitl.core.live.waiting import released, thread_wait_for_status
from hitl.core.models import HumanInterrupt, Run, Thread
from hitl.core.registry import registry


class BrowserSession(SessionAuth):
    """The logged-in browser session, CSRF-checked.

    Without a session user there is nothing to check: the request simply has no
    credentials and gets a 401, not ninja's "CSRF check Failed" 403.
    """

    def __call__(self, request):
        if not request.user.is_authenticated:
            return None
        return super().__call__(request)


api = NinjaAPI(
    title="HITL API",
    version="1",
    urls_namespace="api-v1",
    auth=[TokenBearer(), TokenHeader(), BrowserSession()],
    parser=BoundedParser(),
)


install_error_handlers(api, auth_hint="send a token (Authorization: Bearer …).")


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    errors = exc.errors
    if errors and all((e.get("loc") or [""])[0] == "path" for e in errors):
        # A malformed id in the URL names nothing that exists.
        return api.create_response(request, {"detail": "Not found."}, status=404)
    return api.create_response(
        request, {"detail": _describe_errors(errors), "errors": errors}, status=422
    )


def _describe_errors(errors: list[dict[str, Any]]) -> str:
    """One readable line, e.g. "Invalid request: input: Input should be a valid dictionary"."""
    parts = []
    for error in errors[:5]:
        loc = [str(p) for p in (error.get("loc") or [])[1:]]
        if loc[:1] == ["body"]:  # ninja nests the body under its parameter name
            loc = loc[1:]
        parts.append(f"{'.'.join(loc) or 'body'}: {error.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


# --- schemas --------------------------------------------------------------------


class StartThreadIn(Schema):
    graph: str
    input: dict[str, Any] = {}
    title: str = ""
    reviewer_group: str | None = None
    metadata: dict[str, Any] = {}


class StartRunIn(Schema):
    input: dict[str, Any] = {}


class DecisionIn(Schema):
    type: str
    args: Any = None
    # Seconds during which POST .../undo takes the decision back; the thread resumes after.
    grace_seconds: float = 0
    # Decide an item another reviewer claimed ("I'm on it"); refused with a 409 otherwise.
    override_claim: bool = False


# --- serialization --------------------------------------------------------------


def run_json(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "thread_id": str(run.thread_id),
        "kind": run.kind,
        "status": run.status,
        "input": run.input,
        "result": run.result,
        "error": error_headline(run.error) if run.error else "",
        "final_result": run.final_result,
        "attempts": run.attempts,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def interrupt_json(row: HumanInterrupt) -> dict[str, Any]:
    return {
        "id": str(row.pk),
        "thread_id": str(row.thread_id),
        "run_id": str(row.run_id),
        "interrupt_id": row.interrupt_id,
        "position": row.position,
        "kind": row.kind,
        "action_request": {"action": row.action, "args": row.args},
        "config": {
            "allow_accept": row.allow_accept,
            "allow_edit": row.allow_edit,
            "allow_respond": row.allow_respond,
            "allow_ignore": row.allow_ignore,
        },
        "description": row.description,
        "value": row.raw_value,
        "reviewer_group": row.reviewer_group.name if row.reviewer_group_id else None,
        "status": row.status,
        "response": {"type": row.response_type, "args": row.response_args}
        if row.response_type
        else None,
        "responded_by": row.responded_by.get_username() if row.responded_by_id else None,
        "responded_at": row.responded_at.isoformat() if row.responded_at else None,
        "undo_until": row.undo_until.isoformat() if row.undo_until else None,
        "created_at": row.created_at.isoformat(),
        # Four-eyes and rules (see docs/approvals.md).
        "approvals_required": row.approvals_required,
        "decided_by_rule": row.decided_by_rule or None,
    }


def thread_json(thread: Thread, *, with_details: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": str(thread.pk),
        "graph": thread.graph,
        "title": thread.title,
        "status": thread.status,
        "metadata": thread.metadata,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
    }
    if with_details:
        data["interrupts"] = [
            interrupt_json(r)
            for r in thread_pending_interrupts(thread).select_related("responded_by")
        ]
        latest = thread.runs.order_by("-created_at").first()
        data["latest_run"] = run_json(latest) if latest else None
        data["artifacts"] = [artifact_json(a) for a in thread.artifacts.order_by("created_at")]
    return data


def _thread_for(request: HttpRequest, thread_id: uuid.UUID) -> Thread:
    thread = Thread.objects.filter(pk=thread_id).one_or_none()
    if thread is None or not user_can_view_thread(request.user, thread):
        raise errors.NotFound("No such thread.")
    return thread


# --- endpoints ------------------------------------------------------------------


@api.get("/graphs", response={200: list[str]})
def graphs(request):
    return registry.names()


@api.post("/threads", response={201: dict, 400: Error, 401: Error})
def thread_start(request, body: StartThreadIn):
    group = None
    if body.reviewer_group:
        group = Group.objects.filter(name=body.reviewer_group).first()
        if group is None:
            raise errors.Invalid(f"Unknown reviewer group {body.reviewer_group!r}.")
    run = runs.run_start(
        graph=body.graph,
        input=body.input,
        user=request.user,
        title=body.title,
        reviewer_group=group,
        metadata=body.metadata,
    )
    return Status(
        201, {"thread_id": str(run.thread_id), "run_id": str(run.pk), "status": run.status}
    )


@api.post(
    "/threads/{thread_id}/runs",
    response={201: dict, 400: Error, 403: Error, 404: Error, 409: Error},
)
def thread_run(request, thread_id: uuid.UUID, body: StartRunIn):
    thread = _thread_for(request, thread_id)
    run = runs.run_start(graph=thread.graph, input=body.input, user=request.user, thread=thread)
    return Status(201, {"thread_id": str(thread.pk), "run_id": str(run.pk), "status": run.status})


@api.get("/threads/{thread_id}", response={200: dict, 404: Error})
def thread_detail(request, thread_id: uuid.UUID):
    return thread_json(_thread_for(request, thread_id))


def _thread_answer(thread_id) -> dict[str, Any]:
    return thread_json(Thread.objects.get(pk=thread_id))


@api.get("/threads/{thread_id}/wait", response={200: dict, 400: Error, 404: Error})
async def thread_wait(
    request, thread_id: uuid.UUID, status: str = "interrupted,done,error,idle", timeout: float = 30
):
    """Long-poll: answer once the thread reaches one of `status` (comma-separated) or at timeout."""
    statuses = [s for s in status.split(",") if s in Thread.Status.values]
    if not statuses:
        raise errors.Invalid(f"status must list some of: {', '.join(Thread.Status.values)}.")
    if not math.isfinite(timeout):
        raise errors.Invalid("timeout must be a finite number of seconds.")
    thread = await released(_thread_for)(request, thread_id)
    limit = min(60.0, settings.HITL_API_WAIT_SECONDS)
    await thread_wait_for_status(thread.pk, statuses, min(max(timeout, 0.0), limit))
    return await released(_thread_answer)(thread.pk)


@api.post("/threads/{thread_id}/cancel", response={200: dict, 403: Error, 404: Error})
def thread_cancel(request, thread_id: uuid.UUID):
    thread = runs.thread_cancel(thread=_thread_for(request, thread_id), user=request.user)
    return thread_json(thread)


@api.post(
    "/threads/{thread_id}/files",
    response={201: dict, 400: Error, 403: Error, 404: Error, 413: Error, 503: Error},
)
def thread_file_upload(request, thread_id: uuid.UUID, file: File[UploadedFile] = None):
    """Upload a file into the thread's /mnt/user-data/uploads (multipart field "file")."""
    thread = _thread_for(request, thread_id)
    if file is None:
        # Django drops a file part whose filename is empty, "." or "..": say so plainly
        # instead of a bare "Field required".
        raise errors.Invalid(
            'No file received: send multipart/form-data with a field "file" that carries '
            'the file and its name (e.g. filename="data.csv"); a file named "", "." or ".." '
            "is not accepted."
        )
    stored = storage.thread_file_upload(
        thread=thread, user=request.user, name=file.name or "", content=file
    )
    return Status(201, stored)


@api.get("/threads/{thread_id}/files", response={200: None, 400: Error, 404: Error, 503: Error})
def thread_file_download(request, thread_id: uuid.UUID, path: str):
    """Download one of the thread's files by virtual path (always as an attachment)."""
    return storage.thread_file_response(thread=_thread_for(request, thread_id), path=path)


@api.get("/runs/{run_id}", response={200: dict, 404: Error})
def run_detail(request, run_id: uuid.UUID):
    run = Run.objects.select_related("thread").filter(pk=run_id).one_or_none()
    if run is None or not user_can_view_thread(request.user, run.thread):
        raise errors.NotFound("No such run.")
    return run_json(run)


@api.get("/interrupts", response={200: list[dict]})
def interrupt_list(request, status: str = "pending", limit: int = 50):
    rows = interrupt_list_for_reviewer(request.user)
    if status != "all":
        rows = rows.filter(status=status)
    return [interrupt_json(r) for r in rows[: max(1, min(limit, 200))]]


@api.get("/interrupts/{interrupt_id}", response={200: dict, 404: Error})
def interrupt_detail(request, interrupt_id: uuid.UUID):
    row = get_object_or_404(
        HumanInterrupt.objects.select_related("reviewer_group", "responded_by"), pk=interrupt_id
    )
    if not (user_can_review(request.user, row) or user_can_view_thread(request.user, row.thread)):
        raise errors.NotFound("No such interrupt.")
    return interrupt_json(row)


@api.post(
    "/interrupts/{interrupt_id}/decision",
    response={200: dict, 400: Error, 403: Error, 404: Error, 409: Error},
)
def interrupt_decide(request, interrupt_id: uuid.UUID, body: DecisionIn):
    row = decisions.interrupt_resolve(
        interrupt_id=interrupt_id,
        user=request.user,
        response_type=body.type,
        args=body.args,
        grace=body.grace_seconds,
        respect_claim=not body.override_claim,
    ).row
    data = interrupt_json(row)
    if row.status == HumanInterrupt.Status.PENDING and row.approvals_required > 1:
        data["approvals"] = quorum.approvals_progress(row)
    return data


@api.post(
    "/interrupts/{interrupt_id}/undo",
    response={200: dict, 404: Error, 409: Error},
)
def interrupt_undo(request, interrupt_id: uuid.UUID):
    """Take back your decision while its grace period lasts."""
    return interrupt_json(decisions.interrupt_undo(interrupt_id=interrupt_id, user=request.user))
