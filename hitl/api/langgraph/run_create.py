"""Create a /langgraph run from a request, repeating it across a dropped database session."""

from __future__ import annotations

import logging
import uuid

from django.http import HttpRequest
from django.utils import timezone

from hitl.api.langgraph import services as lg_services
from hitl.api.langgraph.schemas import RunCreateIn, refuse_unsupported
from hitl.api.langgraph.streaming import run_stream_modes
from hitl.core import errors
from hitl.core.db.retry import met_while_committing, retry_transient
from hitl.core.errors import Unavailable
from hitl.core.models import Run

log = logging.getLogger(__name__)

# Modes LangGraph Server emits only on its protocol v2 event-streaming endpoints; its
# runs endpoints (these) refuse them with this 422, and so do we.
V2_ONLY_MODES = frozenset(("tools", "lifecycle"))


class V2OnlyModes(errors.ServiceError):
    status_code = 422


def check_stream_modes(stream_mode) -> None:
    """Refuse `tools` / `lifecycle` as LangGraph Server's runs endpoints do (422)."""
    asked = {stream_mode} if isinstance(stream_mode, str) else set(stream_mode or ())
    v2_only = V2_ONLY_MODES.intersection(asked)
    if v2_only:
        raise V2OnlyModes(
            f"stream_mode entries {sorted(v2_only)!r} are only supported on the v2 event "
            "streaming endpoints (LangGraph Server's protocol v2), which HITL does not serve."
        )


# A client that sends edited arguments as text marks itself with this header.
LENIENT_HEADER = "X-HITL-Lenient-Edits"
# Headers a run's `configurable` never gets: LangGraph Server's (credentials), and the
# reviewer app's CSRF token.
RUN_HEADERS_EXCLUDED = frozenset({"x-api-key", "x-tenant-id", "x-service-key", "x-csrftoken"})


def configurable_headers(request: HttpRequest) -> dict[str, str]:
    """The request headers LangGraph Server copies into a run's `configurable` by
    default: every `x-*` header but credentials, and `user-agent`."""
    return {
        name: value
        for name, value in ((k.lower(), v) for k, v in request.headers.items())
        if (name.startswith("x-") and name not in RUN_HEADERS_EXCLUDED) or name == "user-agent"
    }


def create_run(
    request: HttpRequest,
    body: RunCreateIn,
    thread_id: uuid.UUID | None,
    *,
    stateless: bool,
    streamed: bool = True,
) -> Run:
    """Start or resume a run: one transaction (run_create's), so a fault before its
    commit leaves nothing behind and the whole of it is repeated (retry_transient).

    With `streamed` false (a wait, whose answer is the run's end) the run keeps no stream
    modes of its own: the worker streams it only while someone listens, as LangGraph
    Server streams a run that is not resumable.

    A fault that struck the COMMIT leaves it unknown whether the run was created: the
    thread is read for a run of this request's kind by this user created since the
    first attempt; found, it is the answer, else the request is made again.
    """
    check_stream_modes(body.stream_mode)
    began = timezone.now()
    try:
        return _create_run_once(request, body, thread_id, stateless=stateless, streamed=streamed)
    except Unavailable as exc:
        if thread_id is None or not met_while_committing(exc):
            raise
    kind = Run.Kind.START if body.command is None else Run.Kind.RESUME
    made = retry_transient(_run_made_since)(thread_id, kind, request.user, began)
    if made is not None:
        log.warning("run %s was created before the fault hit its commit; answering it", made.pk)
        return made
    return _create_run_once(request, body, thread_id, stateless=stateless, streamed=streamed)


@retry_transient
def _run_made_since(thread_id: uuid.UUID, kind: str, user, began) -> Run | None:
    runs = Run.objects.select_related("thread").filter(
        thread_id=thread_id, kind=kind, created_at__gte=began
    )
    if user is not None and user.is_authenticated:
        runs = runs.filter(created_by=user)
    return runs.order_by("-created_at").first()


@retry_transient
def _create_run_once(
    request: HttpRequest,
    body: RunCreateIn,
    thread_id: uuid.UUID | None,
    *,
    stateless: bool,
    streamed: bool,
) -> Run:
    refuse_unsupported(
        after_seconds=body.after_seconds or None,
        on_completion=body.on_completion if body.on_completion == "delete" else None,
        durability=body.durability if body.durability not in (None, "sync") else None,
        checkpoint_during=True if body.checkpoint_during is False else None,
        feedback_keys=body.feedback_keys,
        langsmith_tracer=body.langsmith_tracer,
    )
    checkpoint_id = lg_services.checkpoint_id_of(body.checkpoint_id, body.checkpoint)
    # Only the fields the client sent: `command: {}` must not read as `{"resume": null}`.
    command = body.command.dict(exclude_unset=True) if body.command is not None else None
    sent = lg_services.RunRequest(
        webhook=body.webhook,
        checkpoint_id=checkpoint_id,
        stream_modes=run_stream_modes(body.stream_mode) if streamed else (),
        stream_subgraphs=body.stream_subgraphs,
        config=body.config,
        context=body.context,
        breakpoints={"before": body.interrupt_before, "after": body.interrupt_after},
        multitask_strategy=body.multitask_strategy or "reject",
        headers=configurable_headers(request),
        lenient=request.headers.get(LENIENT_HEADER, "").strip().lower() in ("1", "true", "yes"),
        new_thread_id=thread_id if stateless else None,
        if_not_exists=body.if_not_exists,
    )
    return lg_services.run_create(
        user=request.user,
        assistant_id=body.assistant_id,
        # A thread's run is created under the thread's lock, read once for all of it.
        thread_id=None if stateless else thread_id,
        input=body.input,
        command=command,
        metadata=body.metadata,
        request=sent,
    )
