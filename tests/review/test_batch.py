"""Parallel items on one thread: how many are left, items named, all answered alike."""

from __future__ import annotations

from hitl.core.models import HumanInterrupt, Run
from tests.review.conftest import decide_on_page, human_interrupt


def three(paused, user):
    return paused(
        user=user,
        values=[
            human_interrupt("send_email", {"to": "a@b.c"}),
            human_interrupt("send_email", {"to": "d@e.f"}),
            human_interrupt("delete_file", {"path": "x"}, allow_accept=False),
        ],
        title="Parallel",
    )


def test_the_page_counts_answers_and_names_each_item(paused, client_for, reviewer):
    thread, (first, second, third) = three(paused, reviewer)
    client = client_for(reviewer)
    html = client.get(f"/threads/{thread.pk}/").content.decode()
    assert "0 of 3 answered" in html and "the agent resumes after the last (3 left)" in html
    assert "Accept 2 of 3" in html and "1 does not allow accept" in html
    assert "Ignore all 3" in html

    response = decide_on_page(client, second, {"type": "accept"}, follow=True)
    page = response.content.decode()
    assert "Approved: send email (item 2 of 3) on “Parallel”" in page
    assert "1 of 3 answered" in page and "(2 left)" in page
    assert "send email (item 2 of 3)</span>" in page  # the decisions list
    assert response.redirect_chain[-1][0].endswith(f"#interrupt-{first.pk}")


def test_answer_all_alike_respects_each_items_config(paused, client_for, reviewer):
    thread, rows = three(paused, reviewer)
    response = client_for(reviewer).post(
        f"/threads/{thread.pk}/decide-all/", {"type": "accept"}, follow=True
    )
    page = response.content.decode()
    assert "Accepted 2: send email (item 1 of 3); send email (item 2 of 3)." in page
    assert "Left for you to answer: delete file (item 3 of 3): it does not allow accept." in page
    statuses = [HumanInterrupt.objects.get(pk=r.pk).status for r in rows]
    assert statuses == ["resolved", "resolved", "pending"]
    assert not thread.runs.filter(kind="resume").exists()  # one is still open


def test_answer_all_refuses_other_types_and_outsiders(paused, client_for, reviewer, outsider):
    thread, rows = three(paused, reviewer)
    bad = client_for(reviewer).post(
        f"/threads/{thread.pk}/decide-all/", {"type": "edit"}, follow=True
    )
    assert "Choose accept or ignore" in bad.content.decode()
    assert (
        client_for(outsider)
        .post(f"/threads/{thread.pk}/decide-all/", {"type": "ignore"})
        .status_code
        == 404
    )
    assert all(HumanInterrupt.objects.get(pk=r.pk).status == "pending" for r in rows)


def test_after_the_last_answer_the_thread_stays_open_with_the_next_item(
    paused, client_for, reviewer
):
    thread, (first, second, third) = three(paused, reviewer)
    elsewhere, (other,) = paused(user=reviewer, values=[human_interrupt("archive")], title="Else")
    client = client_for(reviewer)
    client.post(f"/threads/{thread.pk}/decide-all/", {"type": "ignore"})
    assert [HumanInterrupt.objects.get(pk=r.pk).status for r in (first, second, third)] == [
        "resolved"
    ] * 3
    resume = Run.objects.get(thread=thread, kind="resume")
    page = client.get(f"/threads/{thread.pk}/").content.decode()
    assert (
        "3 of 3 answered" in page
        and f'the agent resumed: <span class="status status-{resume.status}"' in page
    )
    assert (
        f'href="/threads/{elsewhere.pk}/#interrupt-{other.pk}"' in page
        and "Next item: Else" in page
    )


def test_the_last_single_answer_stays_on_the_thread(paused, client_for, reviewer):
    thread, (first, second, third) = three(paused, reviewer)
    paused(user=reviewer, values=[human_interrupt("archive")], title="Else")
    client = client_for(reviewer)
    decide_on_page(client, first, {"type": "accept"}, follow=True)
    decide_on_page(client, second, {"type": "accept"}, follow=True)
    response = client.post(f"/interrupts/{third.pk}/decide/", {"type": "ignore"})
    assert response["Location"] == f"/threads/{thread.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "Ignored: delete file (item 3 of 3) on “Parallel”; all 3 answered" in page
    assert "; all 3 answered, the agent resumes." in page
