"""Bulk decisions: one decision applied to many interrupts, each through `interrupt_answer`.

Every item is decided on its own (its own transaction, locks, config and schema checks,
audit record and live event), so a bulk accept is exactly N single accepts. Items whose
config does not allow the decision are skipped and listed, never forced.

Permission comes first: an item on a thread the user may not view is "No such item.",
exactly as an id that never existed (no label, no link, no config); one the user may
view but not answer is refused before its config is looked at.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from hitl.core.access.permissions import user_can_review, user_can_view_thread
from hitl.core.decisions.answer import Reply, interrupt_answer
from hitl.core.errors import Conflict, Invalid, NotFound, ServiceError
from hitl.core.models import HumanInterrupt

BULK_TYPES = ("accept", "ignore", "response")
MAX_BULK_ITEMS = 500  # below DATA_UPLOAD_MAX_NUMBER_FIELDS (1000) with room to spare
MAX_TEXT = 10_000

Outcome = Literal["decided", "skipped", "answered", "refused"]
NOT_FOUND = "No such item."
NOT_YOURS = "This interrupt is routed to a reviewer group you are not in."


@dataclass
class BulkResult:
    interrupt_id: str
    row: HumanInterrupt | None
    outcome: Outcome
    reason: str = ""


def parse_ids(values: list[Any]) -> list[uuid.UUID]:
    """Item ids in the order given, without repeats; Invalid for anything else."""
    if not values:
        raise Invalid("Select at least one item.")
    if len(values) > MAX_BULK_ITEMS:
        raise Invalid(f"At most {MAX_BULK_ITEMS} items at once; narrow the filter.")
    try:
        ids = [uuid.UUID(str(value)) for value in values]
    except ValueError:
        raise Invalid("Items are named by their ids.") from None
    return list(dict.fromkeys(ids))


def interrupt_bulk_decide(
    *, user, interrupt_ids: list[Any], response_type: str, text: str = "", grace: float = 0
) -> list[BulkResult]:
    """Decide each item as the user; one result per item, in the order given. With
    `grace` each decision can be undone for that long, as a single one can."""
    if response_type not in BULK_TYPES:
        raise Invalid("Bulk decisions are accept, ignore or response.")
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise Invalid(f"The answer is text of at most {MAX_TEXT} characters.")
    text = text.strip()
    if response_type == "response" and not text:
        raise Invalid("Write the answer to send with Respond.")
    if response_type != "response" and text:
        raise Invalid("Only Respond sends text; clear it to accept or ignore.")
    ids = parse_ids(interrupt_ids)
    rows = HumanInterrupt.objects.filter(pk__in=ids).select_related("thread")
    by_id = {row.pk: row for row in rows}
    results: list[BulkResult] = []
    for pk in ids:
        row = by_id.get(pk)
        may_answer = row is not None and user_can_review(user, row)
        if row is None or not (may_answer or user_can_view_thread(user, row.thread)):
            results.append(BulkResult(str(pk), None, "refused", NOT_FOUND))
            continue
        if not may_answer:
            results.append(BulkResult(str(pk), row, "refused", NOT_YOURS))
            continue
        if row.status == HumanInterrupt.Status.PENDING and response_type not in row.allowed_types:
            verb = "respond" if response_type == "response" else response_type
            results.append(
                BulkResult(str(pk), row, "skipped", f"Its config does not allow {verb}.")
            )
            continue
        try:
            decided = interrupt_answer(
                interrupt_id=pk,
                user=user,
                reply=Reply(
                    response_type=response_type,
                    args=text if response_type == "response" else None,
                    grace=grace,
                ),
                thread_id=row.thread_id,
            )
        except Conflict as exc:
            results.append(BulkResult(str(pk), row, "answered", exc.message))
        except NotFound:  # gone, or out of the user's sight, since it was read above
            results.append(BulkResult(str(pk), None, "refused", NOT_FOUND))
        except ServiceError as exc:
            results.append(BulkResult(str(pk), row, "refused", exc.message))
        else:
            row.undo_until = decided.row.undo_until
            results.append(BulkResult(str(pk), row, "decided"))
    return results
