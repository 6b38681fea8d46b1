"""Bulk answers only about items the caller may see: permission before config, an unseen
item is "not found" with no label or link, the same as an id that never existed, and an
invalid filter value is a 400 that names the field and decides nothing."""

from __future__ import annotations

import uuid

import pytest

from hitl.core.models import AuditEvent, HumanInterrupt, Thread
from tests.review.conftest import human_interrupt

URL = "/interrupts/bulk/"
SECRET = "Which payroll account gets the CEO bonus?"


def post(client, **data):
    return client.post(URL, data, HTTP_ACCEPT="application/json")


def only_result(response) -> dict:
    [item] = response.json()["results"]
    return item


@pytest.fixture
def finance_item(paused, finance_reviewer, finance_group):
    """A pending item of a thread finance owns and reviews; accept is not allowed on it,
    and it carries a clarification question."""
    value = human_interrupt(
        "ask_clarification",
        {"question": SECRET},
        allow_accept=False,
        clarification={"type": "missing_info", "question": SECRET},
    )
    thread, (row,) = paused(user=finance_reviewer, values=[value])
    Thread.objects.filter(pk=thread.pk).update(reviewer_group=finance_group)
    HumanInterrupt.objects.filter(pk=row.pk).update(reviewer_group=finance_group)
    return row


@pytest.mark.parametrize("decision", ["accept", "ignore"])
def test_an_item_the_caller_cannot_see_is_not_found_with_no_label(
    client_for, reviewer, finance_item, decision
):
    """Whatever its config allows: permission comes first."""
    response = post(client_for(reviewer), type=decision, ids=[str(finance_item.pk)])

    assert response.status_code == 200
    assert only_result(response) == {
        "id": str(finance_item.pk),
        "outcome": "refused",
        "word": "refused",
        "reason": "No such item.",
        "label": "",
        "href": "",
        "thread": "",
    }
    body = response.content.decode()
    assert "payroll" not in body and str(finance_item.thread_id) not in body
    assert HumanInterrupt.objects.get(pk=finance_item.pk).status == "pending"
    assert not AuditEvent.objects.filter(kind="interrupt.answered").exists()


@pytest.mark.parametrize("decision", ["accept", "ignore"])
def test_an_unseen_item_answers_exactly_as_an_id_that_never_existed(
    client_for, reviewer, finance_item, decision
):
    client = client_for(reviewer)
    missing = str(uuid.uuid4())
    seen = post(client, type=decision, ids=[str(finance_item.pk)]).json()
    never = post(client, type=decision, ids=[missing]).json()

    def without_ids(payload: dict) -> dict:
        payload = {**payload, "results": [{**r, "id": "-"} for r in payload["results"]]}
        payload["html"] = payload["html"].replace(str(finance_item.pk), "-").replace(missing, "-")
        return payload

    assert without_ids(seen) == without_ids(never)


def test_an_item_the_caller_sees_but_may_not_answer_is_refused_before_its_config(
    paused, client_for, requester, finance_group
):
    """The requester sees their thread's item, routed to finance: refused, not 'skipped'."""
    _, (row,) = paused(user=requester, values=[human_interrupt("pay", allow_accept=False)])
    HumanInterrupt.objects.filter(pk=row.pk).update(reviewer_group=finance_group)

    item = only_result(post(client_for(requester), type="accept", ids=[str(row.pk)]))

    assert (item["outcome"], item["label"]) == ("refused", "pay")
    assert "reviewer group you are not in" in item["reason"]
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"group": "{finance}"}, "group"),
        ({"group": "not-a-number"}, "group"),
        ({"graph": "no-such-graph"}, "graph"),
        ({"tab": "everything"}, "tab"),
        ({"claimed": "by-anyone"}, "claimed"),
        ({"clarification": "secret_kind"}, "clarification"),
        ({"order": "random"}, "order"),
    ],
)
def test_an_invalid_filter_is_a_400_naming_the_field_that_decides_nothing(
    paused, client_for, requester, reviewer, finance_group, data, field
):
    _, rows = paused(user=requester, values=[human_interrupt("a"), human_interrupt("b")])
    data = {**data, "group": str(finance_group.pk)} if data.get("group") == "{finance}" else data
    client = client_for(reviewer)

    counted = client.get(URL, data)
    decided = post(client, type="accept", scope="filter", **data)

    for response in (counted, decided):
        assert response.status_code == 400, response.content
        assert field in response.json()["error"]
    assert {r.status for r in HumanInterrupt.objects.filter(pk__in=[r.pk for r in rows])} == {
        "pending"
    }
    assert not AuditEvent.objects.filter(kind="interrupt.answered").exists()


def test_a_group_the_user_is_in_still_filters(
    paused, client_for, requester, reviewer, reviewers_group
):
    paused(user=requester, values=[human_interrupt("a")])
    client = client_for(reviewer)
    assert client.get(URL, {"group": str(reviewers_group.pk)}).json() == {"count": 1}
    response = post(client, type="ignore", scope="filter", group=str(reviewers_group.pk))
    assert response.json()["counts"] == {"decided": 1}
