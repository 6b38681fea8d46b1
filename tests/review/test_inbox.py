"""The inbox: who sees what, tabs, filters, keyset pages with a constant number of queries."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hitl.core.models import HumanInterrupt, Thread
from tests.review.conftest import human_interrupt

pytestmark = pytest.mark.django_db


def row_ids(response) -> list[str]:
    return re.findall(r'<tr class="row [\w-]+" id="row-([0-9a-f-]+)"', response.content.decode())


def spread(rows, *, step_seconds: int = 60) -> None:
    """Give rows distinct creation times, oldest first, with one tie to exercise the id order."""
    start = timezone.now() - timedelta(days=1)
    for index, row in enumerate(rows):
        stamp = start + timedelta(seconds=step_seconds * (index - (1 if index == 5 else 0)))
        HumanInterrupt.objects.filter(pk=row.pk).update(created_at=stamp)


def test_anonymous_is_sent_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_reviewer_sees_only_interrupts_routed_to_their_groups(
    paused, client_for, reviewer, requester, finance_group
):
    _, (mine,) = paused(user=requester, values=[human_interrupt("send_email")])
    _, (theirs,) = paused(
        user=requester, values=[human_interrupt("pay_invoice", reviewer_group="finance")]
    )
    assert theirs.reviewer_group == finance_group
    response = client_for(reviewer).get("/")
    assert response.status_code == 200
    assert row_ids(response) == [str(mine.pk)]
    assert "pay_invoice" not in response.content.decode()


def test_review_all_sees_every_group_and_assigned_to_me_narrows_it(
    paused, client_for, review_all_user, requester, finance_group
):
    _, (a,) = paused(user=requester, values=[human_interrupt("send_email")])
    _, (b,) = paused(
        user=requester, values=[human_interrupt("pay_invoice", reviewer_group="finance")]
    )
    client = client_for(review_all_user)
    assert set(row_ids(client.get("/"))) == {str(a.pk), str(b.pk)}
    review_all_user.groups.add(finance_group)
    assert row_ids(client.get("/?mine=1")) == [str(b.pk)]
    assert row_ids(client.get(f"/?group={finance_group.pk}")) == [str(b.pk)]


def test_requester_sees_their_own_threads_not_others(
    paused, client_for, requester, outsider, reviewer
):
    own, _ = paused(user=requester, values=[human_interrupt()], title="mine")
    other, _ = paused(user=outsider, values=[human_interrupt()], title="not mine")
    response = client_for(requester).get("/")
    assert response.context["query"].tab == "all"  # not a reviewer: threads first
    assert row_ids(response) == [str(own.pk)]
    assert client_for(requester).get(f"/threads/{other.pk}/").status_code == 404


def test_thread_tabs_filter_by_status_and_graph(paused, client_for, admin_user, requester):
    interrupted, _ = paused(user=requester, values=[human_interrupt()], graph="approval")
    done, _ = paused(user=requester, values=[human_interrupt()], graph="raw_question")
    Thread.objects.filter(pk=done.pk).update(status="done")
    client = client_for(admin_user)
    assert row_ids(client.get("/?tab=interrupted")) == [str(interrupted.pk)]
    assert row_ids(client.get("/?tab=done")) == [str(done.pk)]
    assert set(row_ids(client.get("/?tab=all"))) == {str(interrupted.pk), str(done.pk)}
    assert row_ids(client.get("/?tab=all&graph=raw_question")) == [str(done.pk)]
    assert row_ids(client.get("/?tab=error")) == []


def test_clarification_filter(paused, client_for, reviewer, requester):
    clarify = human_interrupt(
        "ask_clarification",
        {"question": "Which quarter?", "clarification_type": "approach_choice", "options": ["Q1"]},
        clarification={"type": "approach_choice", "question": "Which quarter?", "options": ["Q1"]},
    )
    _, (question,) = paused(user=requester, values=[clarify])
    paused(user=requester, values=[human_interrupt("send_email")])
    client = client_for(reviewer)
    response = client.get("/?clarification=approach_choice")
    assert row_ids(response) == [str(question.pk)]
    row = response.content.decode().split(f'id="row-{question.pk}"')[1]
    assert "approach choice</span> Which quarter?" in row  # shown as a clarification
    assert row_ids(client.get("/?clarification=risk_confirmation")) == []
    assert len(row_ids(client.get("/"))) == 2


def test_keyset_pages_cover_every_item_once_in_both_orders(paused, client_for, reviewer, requester):
    _, rows = paused(user=requester, values=[human_interrupt() for _ in range(60)])
    spread(rows)
    rows = list(HumanInterrupt.objects.order_by("-created_at", "-pk"))
    newest = [str(r.pk) for r in rows]
    client = client_for(reviewer)

    seen, url = [], "/"
    while url:
        response = client.get(url)
        seen += row_ids(response)
        url = response.context["next_url"]
    assert seen == newest

    # With keysets the last page is the oldest full page (not the remainder).
    last = client.get("/?last=1")
    assert row_ids(last) == newest[35:]
    assert last.context["next_url"] == ""
    back = client.get(last.context["prev_url"])
    assert row_ids(back) == newest[10:35]
    front = client.get(back.context["prev_url"])
    assert row_ids(front) == newest[:10]
    assert front.context["prev_url"] == ""

    oldest, url = [], "/?order=oldest"
    while url:
        response = client.get(url)
        oldest += row_ids(response)
        url = response.context["next_url"]
    assert oldest == list(reversed(newest))


def test_a_mangled_cursor_shows_the_first_page(paused, client_for, reviewer, requester):
    paused(user=requester, values=[human_interrupt()])
    response = client_for(reviewer).get("/?after=not-a-cursor!!")
    assert response.status_code == 200
    assert len(row_ids(response)) == 1
    assert "no longer valid" in response.content.decode()


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_pending_pages_take_a_constant_number_of_queries(
    paused, client_for, reviewer, requester, django_assert_num_queries
):
    client = client_for(reviewer)
    _, rows = paused(user=requester, values=[human_interrupt() for _ in range(3)])
    few = _queries(client, "/")
    _, more = paused(user=requester, values=[human_interrupt() for _ in range(57)])
    spread(rows + more)
    first = client.get("/")
    assert len(row_ids(first)) == 25
    # session, user, groups, pending list, pending count, (no per-row queries)
    with django_assert_num_queries(few):
        client.get("/")
    with django_assert_num_queries(few):
        client.get(first.context["next_url"])
    with django_assert_num_queries(few):
        client.get("/?last=1")


def test_thread_pages_take_a_constant_number_of_queries(
    paused, client_for, admin_user, requester, django_assert_num_queries
):
    client = client_for(admin_user)
    paused(user=requester, values=[human_interrupt()])
    few = _queries(client, "/?tab=all")
    for _ in range(30):
        paused(user=requester, values=[human_interrupt(), human_interrupt("other")])
    response = client.get("/?tab=all")
    assert len(row_ids(response)) == 25
    with django_assert_num_queries(few):
        client.get("/?tab=all")
    with django_assert_num_queries(few):
        client.get(response.context["next_url"])


def test_the_partial_is_just_the_list(paused, client_for, reviewer, requester):
    paused(user=requester, values=[human_interrupt()])
    html = client_for(reviewer).get("/?partial=1").content.decode()
    assert "<html" not in html
    assert 'id="pending-sync" data-count="1"' in html
