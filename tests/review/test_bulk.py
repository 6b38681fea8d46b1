"""Bulk decisions from the inbox: each item through the decision service, per-item results."""

from __future__ import annotations

import pytest

from hitl.core import decisions
from hitl.core.models import AuditEvent, HumanInterrupt, Run
from tests.review.conftest import human_interrupt

URL = "/interrupts/bulk/"


def post(client, **data):
    return client.post(URL, data, HTTP_ACCEPT="application/json")


def outcomes(response) -> dict[str, tuple[str, str]]:
    return {item["id"]: (item["outcome"], item["reason"]) for item in response.json()["results"]}


def test_selected_items_are_decided_one_by_one_and_forbidden_ones_skipped(
    paused, client_for, requester, reviewer
):
    _, (first, second, locked) = paused(
        user=requester,
        values=[
            human_interrupt("send_email"),
            human_interrupt("delete_file"),
            human_interrupt("wire_money", allow_accept=False),
        ],
    )
    response = post(
        client_for(reviewer), type="accept", ids=[str(first.pk), str(second.pk), str(locked.pk)]
    )

    assert response.status_code == 200
    assert outcomes(response) == {
        str(first.pk): ("decided", ""),
        str(second.pk): ("decided", ""),
        str(locked.pk): ("skipped", "Its config does not allow accept."),
    }
    assert response.json()["counts"] == {"decided": 2, "skipped": 1}
    assert "wire money" in response.json()["html"] and "skipped" in response.json()["html"]
    statuses = dict(HumanInterrupt.objects.values_list("pk", "status"))
    assert (statuses[first.pk], statuses[second.pk], statuses[locked.pk]) == (
        "resolved",
        "resolved",
        "pending",
    )
    answered = AuditEvent.objects.filter(kind="interrupt.answered")
    assert sorted(e.interrupt_id for e in answered) == sorted([first.pk, second.pk])
    assert {e.actor_id for e in answered} == {reviewer.pk}
    # The thread still waits on the skipped item: no resume yet.
    assert not Run.objects.filter(kind="resume").exists()


def test_one_answer_goes_to_every_item_with_respond(paused, client_for, requester, reviewer):
    _, rows = paused(user=requester, values=[human_interrupt("a"), "What now?"])
    response = post(
        client_for(reviewer), type="response", text="  use the EU region ", ids=[r.pk for r in rows]
    )
    assert response.json()["counts"] == {"decided": 2}
    assert [r.response_args for r in HumanInterrupt.objects.order_by("created_at", "position")] == [
        "use the EU region",
        "use the EU region",
    ]
    assert Run.objects.filter(kind="resume").count() == 1


def test_items_answered_meanwhile_and_items_of_other_groups_are_listed_not_forced(
    paused, client_for, requester, reviewer, second_reviewer, finance_group
):
    _, (taken, free) = paused(user=requester, values=[human_interrupt("a"), human_interrupt("b")])
    _, (elsewhere,) = paused(user=requester, values=[human_interrupt("c")])
    HumanInterrupt.objects.filter(pk=elsewhere.pk).update(reviewer_group=finance_group)
    decisions.interrupt_resolve(interrupt_id=taken.pk, user=second_reviewer, response_type="ignore")

    response = post(client_for(reviewer), type="accept", ids=[taken.pk, free.pk, elsewhere.pk])

    result = outcomes(response)
    assert result[str(taken.pk)] == ("answered", "Already answered by sam.")
    assert result[str(free.pk)] == ("decided", "")
    assert result[str(elsewhere.pk)][0] == "refused"
    taken.refresh_from_db()
    assert (taken.response_type, taken.responded_by) == ("ignore", second_reviewer)
    assert HumanInterrupt.objects.get(pk=elsewhere.pk).status == "pending"


def test_select_all_matching_the_filter_reaches_across_pages(
    paused, client_for, requester, reviewer
):
    for _ in range(30):  # more than one inbox page (25)
        paused(user=requester, values=[human_interrupt("deploy")], graph="approval")
    _, (other,) = paused(user=requester, values=[human_interrupt("x")], graph="raw_question")
    client = client_for(reviewer)

    assert client.get(URL, {"graph": "approval"}).json() == {"count": 30}
    assert client.get(URL).json() == {"count": 31}
    response = post(client, type="ignore", scope="filter", graph="approval")

    assert response.json()["counts"] == {"decided": 30}
    assert HumanInterrupt.objects.filter(status="resolved", response_type="ignore").count() == 30
    assert HumanInterrupt.objects.get(pk=other.pk).status == "pending"
    again = post(client, type="ignore", scope="filter", graph="approval")
    assert (
        again.status_code == 400
        and again.json()["error"] == "Nothing matches this filter any more."
    )


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"type": "edit"}, "Bulk decisions are accept, ignore or response."),
        ({"type": "accept", "ids": []}, "Select at least one item."),
        ({"type": "accept", "ids": ["nope"]}, "Items are named by their ids."),
        (
            {"type": "accept", "text": "hi"},
            "Only Respond sends text; clear it to accept or ignore.",
        ),
        ({"type": "response", "text": "  "}, "Write the answer to send with Respond."),
        ({"type": "response", "text": "a\x00b"}, "must not contain NUL"),
        ({"type": "accept", "ids": ["00000000-0000-0000-0000-000000000000"] * 501}, "At most 500"),
    ],
)
def test_bad_bulk_requests_are_a_400_that_changes_nothing(
    paused, client_for, requester, reviewer, data, error
):
    _, (row,) = paused(user=requester, values=[human_interrupt("a")])
    data = {"ids": [str(row.pk)], **data}
    response = post(client_for(reviewer), **data)
    assert response.status_code == 400
    assert error in response.json()["error"]
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    assert not AuditEvent.objects.filter(kind="interrupt.answered").exists()


def test_bulk_needs_a_login_and_a_post_or_get(client, paused, requester):
    assert client.post(URL, {"type": "accept"}).status_code == 302
    assert client.put(URL).status_code in (302, 405)
