"""Four-eyes progress over the live sockets: group members and thread watchers only."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from hitl.core import decisions
from tests.review.conftest import human_interrupt
from tests.review.test_consumers import connect, fresh_layer, next_of, pause  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_approval_reaches_inboxes_and_the_thread_as_progress(
    reviewer, second_reviewer, finance_reviewer, requester
):
    async def scenario():
        thread, (row,) = await pause(user=requester, values=[human_interrupt(approvals=2)])
        sam = await connect("/ws/inbox/", second_reviewer)
        fiona = await connect("/ws/inbox/", finance_reviewer)
        watcher = await connect(f"/ws/threads/{thread.pk}/", requester)
        await sync_to_async(decisions.interrupt_resolve)(
            interrupt_id=row.pk, user=reviewer, response_type="accept"
        )
        expected = {
            "type": "interrupt.progress",
            "thread_id": str(thread.pk),
            "interrupt_id": str(row.pk),
            "reviewer_group_id": row.reviewer_group_id,
            "approvals": 1,
            "required": 2,
            "approvers": ["rita"],
            "edited": False,
        }
        assert await sam.receive_json_from(timeout=5) == expected
        assert await next_of(watcher, "interrupt.progress") == expected
        assert await fiona.receive_nothing(timeout=0.5)  # not routed to finance

        await sync_to_async(decisions.interrupt_resolve)(
            interrupt_id=row.pk, user=second_reviewer, response_type="accept"
        )
        done = await sam.receive_json_from(timeout=5)
        assert (done["type"], done["status"], done["responded_by"]) == (
            "interrupt.changed",
            "resolved",
            "sam",
        )
        for ws in (sam, fiona, watcher):
            await ws.disconnect()

    asyncio.run(scenario())
