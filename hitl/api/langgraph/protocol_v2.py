"""LangGraph Server's protocol v2 thread session (langgraph_sdk's `threads.stream`), which
HITL does not serve: its two endpoints answer a JSON 404 that says so, instead of a bare
"Not Found"."""

from __future__ import annotations

import uuid

from ninja import Router

from hitl.api.errors import ERRORS
from hitl.core import errors

router = Router(tags=["threads"])

REFUSAL = (
    "The protocol v2 thread session (threads.stream: commands and events over SSE or a "
    "WebSocket) is not served by HITL; start runs with runs.stream / runs.create and "
    "follow them with runs.join_stream or threads.join_stream."
)


@router.post("/{thread_id}/commands", response={200: dict, **ERRORS})
def thread_commands(request, thread_id: uuid.UUID):
    raise errors.NotFound(REFUSAL)


@router.post("/{thread_id}/stream/events", response={200: dict, **ERRORS})
def thread_stream_events(request, thread_id: uuid.UUID):
    raise errors.NotFound(REFUSAL)
