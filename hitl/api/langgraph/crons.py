"""Crons of the LangGraph-compatible API (langgraph_sdk's `client.crons`): runs of an
assistant on a schedule, on one thread or on a new thread each time.

Each user sees and changes their own crons (a superuser: all). A cron's run is started
by beat as the cron's creator, with the same permission checks as any other run.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from ninja import Field, Router

from hitl.api.errors import ERRORS
from hitl.api.langgraph.schemas import ObjectBody
from hitl.core import errors
from hitl.core.access.permissions import cron_list_for_user
from hitl.core.db.json_contains import JSONContains
from hitl.core.errors import check_storable
from hitl.core.models import Cron
from hitl.core.resources.crons import (
    CronTerms,
    cron_create,
    cron_delete,
    cron_for_user,
    cron_update,
)

router = Router()

MAX_OFFSET = 1_000_000_000
CronField = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "payload",
    "user_id",
    "next_run_date",
    "metadata",
    "enabled",
]


class CronRunIn(ObjectBody):
    input: Any = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    webhook: str | None = Field(None, max_length=500)
    interrupt_before: Any = None
    interrupt_after: Any = None
    checkpoint_during: bool | None = None
    on_run_completed: Literal["delete", "keep"] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    end_time: datetime | None = None
    enabled: bool | None = None
    timezone: str | None = Field(None, max_length=64)
    stream_mode: Any = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: Literal["sync", "async", "exit"] | None = None


class CronCreateIn(CronRunIn):
    schedule: str = Field(..., max_length=200)
    assistant_id: str = Field(..., max_length=100)


class CronPatchIn(CronRunIn):
    schedule: str | None = Field(None, max_length=200)


class CronCountIn(ObjectBody):
    assistant_id: str | None = Field(None, max_length=100)
    thread_id: uuid.UUID | None = None
    metadata: dict[str, Any] | None = None
    enabled: bool | None = None


class CronSearchIn(CronCountIn):
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    sort_by: (
        Literal[
            "cron_id",
            "assistant_id",
            "thread_id",
            "next_run_date",
            "end_time",
            "created_at",
            "updated_at",
        ]
        | None
    ) = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[CronField] | None = None


# Fields a cron's run cannot honour, and why (a clear 400 instead of ignoring them).
REFUSED = {
    "interrupt_before": "breakpoints are not supported on cron runs",
    "interrupt_after": "breakpoints are not supported on cron runs",
    "stream_mode": "a cron's run has no stream of its own; join it with runs.join_stream",
    "stream_subgraphs": "a cron's run has no stream of its own",
    "stream_resumable": "a cron's run has no stream of its own",
}


def _refuse_unsupported(body: CronRunIn) -> None:
    sent = body.dict(exclude_unset=True)
    for name, why in REFUSED.items():
        if sent.get(name) not in (None, False, [], {}):
            raise errors.Invalid(f"{name}: {why}.")
    if sent.get("on_run_completed") == "delete":
        raise errors.Invalid(
            "on_run_completed='delete': HITL keeps a cron's threads (reviewers may still "
            "have to answer them); delete them with threads.delete."
        )
    if sent.get("multitask_strategy") not in (None, "reject"):
        raise errors.Invalid(
            "multitask_strategy: a cron's tick on a busy thread is skipped (reject), and "
            "audited as such."
        )
    if sent.get("checkpoint_during") is False:
        raise errors.Invalid(
            "checkpoint_during: HITL checkpoints every step (durability 'sync'); send true "
            "or nothing."
        )
    if sent.get("durability") not in (None, "sync"):
        raise errors.Invalid("durability: HITL checkpoints every step (durability 'sync').")


def _payload(body: CronRunIn) -> dict[str, Any]:
    sent = body.dict(exclude_unset=True)
    keys = ("input", "metadata", "webhook", "config", "context")
    return {k: sent[k] for k in keys if sent.get(k) is not None}


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def cron_json(cron: Cron) -> dict[str, Any]:
    return {
        "cron_id": str(cron.pk),
        "assistant_id": cron.assistant_id,
        "thread_id": str(cron.thread_id) if cron.thread_id else None,
        "on_run_completed": None if cron.thread_id else "keep",
        "end_time": _iso(cron.end_time),
        "schedule": cron.schedule,
        "timezone": cron.timezone or None,
        "created_at": _iso(cron.created_at),
        "updated_at": _iso(cron.updated_at),
        "payload": cron.payload,
        "user_id": str(cron.user_id) if cron.user_id else None,
        "next_run_date": _iso(cron.next_run_date) if cron.enabled else None,
        "metadata": cron.metadata,
        "enabled": cron.enabled,
    }


def create_cron(request, body: CronCreateIn, thread_id: uuid.UUID | None) -> dict[str, Any]:
    _refuse_unsupported(body)
    cron = cron_create(
        user=request.user,
        assistant_id=body.assistant_id,
        schedule=body.schedule,
        payload=_payload(body),
        thread_id=thread_id,
        terms=CronTerms(
            timezone=body.timezone,
            end_time=body.end_time,
            enabled=True if body.enabled is None else body.enabled,
            metadata=body.metadata,
        ),
    )
    return cron_json(cron)


@router.post("", response={200: dict, **ERRORS}, tags=["crons"])
def crons_create(request, body: CronCreateIn):
    """Schedule runs of an assistant, each on a new thread."""
    return create_cron(request, body, None)


class AssistantIdError(errors.ServiceError):
    status_code = 422  # LangGraph Server's answer to a non-UUID assistant_id here


def _filtered(request, body: CronCountIn):
    check_storable(body.metadata, "metadata")
    crons = cron_list_for_user(request.user)
    if body.assistant_id:
        try:
            uuid.UUID(body.assistant_id)
        except ValueError:
            # As LangGraph Server: a cron stores its assistant's id, never a graph name.
            raise AssistantIdError(
                f"assistant_id must be an assistant's UUID, not {body.assistant_id!r}; "
                "a graph's default assistant has one too (assistants.search(graph_id=...))."
            ) from None
        crons = crons.filter(assistant_id=body.assistant_id)
    if body.thread_id:
        crons = crons.filter(thread_id=body.thread_id)
    if body.enabled is not None:
        crons = crons.filter(enabled=body.enabled)
    if body.metadata:
        # Containment, as LangGraph Server filters: the keys are data, never lookups.
        crons = crons.filter(JSONContains("metadata", body.metadata))
    return crons


SORT = {"cron_id": "id", "thread_id": "thread_id"}


@router.post("/search", response={200: list[dict], **ERRORS}, tags=["crons"])
def crons_search(request, body: CronSearchIn, response: HttpResponse):
    crons = _filtered(request, body)
    key = SORT.get(body.sort_by or "created_at", body.sort_by or "created_at")
    crons = crons.order_by(key if body.sort_order == "asc" else f"-{key}", "id")
    page = list(crons[body.offset : body.offset + body.limit + 1])
    if len(page) > body.limit:
        response["X-Pagination-Next"] = str(body.offset + body.limit)
    items = [cron_json(c) for c in page[: body.limit]]
    if body.select:
        items = [{k: c[k] for k in body.select} for c in items]
    return items


@router.post("/count", response={200: int, **ERRORS}, tags=["crons"])
def crons_count(request, body: CronCountIn):
    return _filtered(request, body).count()


@router.get("/{cron_id}", response={200: dict, **ERRORS}, tags=["crons"])
def crons_get(request, cron_id: str):
    return cron_json(cron_for_user(request.user, cron_id))


@router.patch("/{cron_id}", response={200: dict, **ERRORS}, tags=["crons"])
def crons_update(request, cron_id: str, body: CronPatchIn):
    _refuse_unsupported(body)
    sent = body.dict(exclude_unset=True)
    cron = cron_update(
        user=request.user,
        cron_id=cron_id,
        schedule=body.schedule,
        timezone=body.timezone,
        end_time=body.end_time,
        enabled=body.enabled,
        payload=_payload(body),
        metadata=sent.get("metadata"),
    )
    return cron_json(cron)


@router.delete("/{cron_id}", response={204: None, **ERRORS}, tags=["crons"])
def crons_delete(request, cron_id: str):
    cron_delete(user=request.user, cron_id=cron_id)
    return 204, None
