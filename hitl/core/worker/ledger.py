"""The tool-execution ledger behind agents.ledger: approved calls run at most once."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from hitl.core.db.retry import retry_transient
from hitl.core.models import ToolExecution

log = logging.getLogger(__name__)


class ThreadToolLedger:
    """One thread's ledger. Each write commits on its own, before and after the tool runs.

    ToolNode calls it from its executor's threads. A Django connection opened there is
    that thread's own and would never go back to the pool, so each call off the thread
    that built the ledger hands its connection back when it is done.
    """

    def __init__(self, thread_id: Any):
        self.thread_id = thread_id
        self._owner = threading.get_ident()

    def _release(self) -> None:
        if threading.get_ident() != self._owner:
            connection.close()

    def begin(self, *, interrupt_id: str, tool_call_id: str, tool: str) -> dict[str, Any] | None:
        try:
            return self._begin(interrupt_id=interrupt_id, tool_call_id=tool_call_id, tool=tool)
        finally:
            self._release()

    def _begin(self, *, interrupt_id: str, tool_call_id: str, tool: str) -> dict[str, Any] | None:
        key = {
            "thread_id": self.thread_id,
            "interrupt_id": interrupt_id,
            "tool_call_id": tool_call_id,
        }
        try:
            with transaction.atomic():
                ToolExecution.objects.create(tool=tool[:200], **key)
        except IntegrityError:
            earlier = ToolExecution.objects.filter(**key).values("status", "result").first()
            if earlier is None:
                # Not a duplicate: the thread's row is not visible to this connection
                # (deleted, or still in a caller's open transaction). Nothing ran before:
                # the call runs, unrecorded, as it would without a ledger.
                log.warning("tool ledger: %s could not be recorded; it runs unrecorded", key)
            return earlier
        return None

    def finish(self, *, interrupt_id: str, tool_call_id: str, result: dict[str, Any]) -> None:
        try:
            _done_record(self.thread_id, interrupt_id, tool_call_id, result)
        finally:
            self._release()


@retry_transient
def _done_record(thread_id: Any, interrupt_id: str, tool_call_id: str, result: dict) -> None:
    """Record a tool's result, again on a fresh connection if its session was dropped:
    the effect happened, and a run redelivered without the record could only report it
    as unknown. The UPDATE is the same whether it lands once or twice."""
    ToolExecution.objects.filter(
        thread_id=thread_id, interrupt_id=interrupt_id, tool_call_id=tool_call_id
    ).update(status=ToolExecution.Status.DONE, result=result, finished_at=timezone.now())
