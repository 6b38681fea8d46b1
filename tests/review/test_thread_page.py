"""The thread page: decisions that follow allow_*, typed edits, inline errors, files, XSS."""

from __future__ import annotations

import re

import pytest

from hitl.core.models import Artifact, HumanInterrupt, Run
from tests.review.conftest import dangerous_markup, decide_on_page, human_interrupt

pytestmark = pytest.mark.django_db


def card(html: str, row) -> str:
    """The HTML of one interrupt card."""
    start = html.index(f'id="interrupt-{row.pk}"')
    end = html.find("</article>", start)
    return html[start:end]


def arg_names(client, row) -> dict[str, str]:
    """Form field name of each argument key, as the page renders them."""
    html = card(client.get(f"/threads/{row.thread_id}/").content.decode(), row)
    return {key: name for name, key in re.findall(r'name="(arg_\d+)"[^>]*data-key="([^"]*)"', html)}


@pytest.mark.parametrize(
    "flags",
    [
        {"allow_accept": True, "allow_edit": False, "allow_respond": False, "allow_ignore": False},
        {"allow_accept": True, "allow_edit": True, "allow_respond": False, "allow_ignore": True},
        {"allow_accept": False, "allow_edit": False, "allow_respond": True, "allow_ignore": True},
        {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True},
    ],
)
def test_controls_follow_the_allow_flags(paused, client_for, reviewer, requester, flags):
    thread, (row,) = paused(user=requester, values=[human_interrupt(**flags)])
    html = card(client_for(reviewer).get(f"/threads/{thread.pk}/").content.decode(), row)
    buttons = set(re.findall(r'name="type" value="(\w+)"', html))
    expected = {
        name
        for flag, name in [
            ("allow_accept", "accept"),
            ("allow_edit", "edit"),
            ("allow_respond", "response"),
            ("allow_ignore", "ignore"),
        ]
        if flags[flag]
    }
    assert buttons == expected
    assert ('name="arg_0"' in html) == flags["allow_edit"]
    assert ('name="response"' in html) == flags["allow_respond"]


def test_a_type_the_config_refuses_is_an_inline_400(paused, client_for, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt(allow_edit=False)])
    response = decide_on_page(client_for(reviewer), row, {"type": "edit", "arg_0": "x@y.z"})
    assert response.status_code == 400
    assert "does not allow edit" in card(response.content.decode(), row)
    row.refresh_from_db()
    assert row.status == "pending"


def test_accept_resolves_and_resumes(paused, client_for, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    response = decide_on_page(client_for(reviewer), row, {"type": "accept"})
    assert response.status_code == 302
    assert response["Location"] == f"/threads/{thread.pk}/"
    row.refresh_from_db()
    assert (row.status, row.response_type, row.responded_by) == ("resolved", "accept", reviewer)
    assert Run.objects.filter(thread=thread, kind="resume").count() == 1


def test_edit_keeps_json_types(paused, client_for, reviewer, requester):
    args = {
        "to": "a@b.c",
        "copies": 1,
        "ratio": 0.5,
        "urgent": False,
        "tags": ["x"],
        "meta": {"depth": {"n": 1}},
    }
    thread, (row,) = paused(user=requester, values=[human_interrupt(args=args)])
    client = client_for(reviewer)
    names = arg_names(client, row)
    response = decide_on_page(
        client,
        row,
        {
            "type": "edit",
            names["to"]: "cfo@example.com",
            names["copies"]: "3",
            names["ratio"]: "2.25",
            names["urgent"]: "on",
            names["tags"]: '["x", "y", 3]',
            names["meta"]: '{"depth": {"n": 2, "ok": true}}',
        },
    )
    assert response.status_code == 302, card(response.content.decode(), row)
    row.refresh_from_db()
    assert row.response_type == "edit"
    assert row.response_args == {
        "action": "send_email",
        "args": {
            "to": "cfo@example.com",
            "copies": 3,
            "ratio": 2.25,
            "urgent": True,
            "tags": ["x", "y", 3],
            "meta": {"depth": {"n": 2, "ok": True}},
        },
    }
    assert type(row.response_args["args"]["copies"]) is int


def test_a_schema_error_shows_inline_and_keeps_the_values(paused, client_for, reviewer, requester):
    schema = {
        "type": "object",
        "properties": {
            "to": {"type": "string", "minLength": 3},
            "copies": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["to"],
        "additionalProperties": False,
    }
    value = human_interrupt(args={"to": "a@b.c", "copies": 1}, args_schema=schema)
    thread, (row,) = paused(user=requester, values=[value])
    client = client_for(reviewer)
    names = arg_names(client, row)
    response = decide_on_page(
        client, row, {"type": "edit", names["to"]: "a@b.c", names["copies"]: "11"}
    )
    assert response.status_code == 400
    html = card(response.content.decode(), row)
    assert "schema at copies" in html and "11 is greater than the maximum of 10" in html
    assert 'value="11"' in html  # the reviewer's input survives the round trip
    row.refresh_from_db()
    assert row.status == "pending"


def test_unparseable_fields_are_field_errors(paused, client_for, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt(args={"n": 1, "meta": {}})])
    client = client_for(reviewer)
    names = arg_names(client, row)
    response = decide_on_page(client, row, {"type": "edit", names["n"]: "many", names["meta"]: "{"})
    assert response.status_code == 400
    html = card(response.content.decode(), row)
    assert "Enter a whole number." in html
    assert "Enter a valid JSON." in html


def test_a_response_needs_text(paused, client_for, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    response = decide_on_page(client_for(reviewer), row, {"type": "response", "response": "  "})
    assert response.status_code == 400
    assert "Write a response" in card(response.content.decode(), row)


def test_clarification_options_are_buttons_and_answer_as_a_response(
    paused, client_for, reviewer, requester
):
    value = human_interrupt(
        "ask_clarification",
        {"question": "Which quarter?", "clarification_type": "approach_choice"},
        allow_accept=False,
        allow_edit=False,
        clarification={
            "type": "approach_choice",
            "question": "Which quarter?",
            "options": ["Q1 2025", "Q3 2025"],
        },
    )
    thread, (row,) = paused(user=requester, values=[value])
    client = client_for(reviewer)
    html = card(client.get(f"/threads/{thread.pk}/").content.decode(), row)
    assert re.findall(r'name="choice" value="([^"]+)"', html) == ["Q1 2025", "Q3 2025"]
    assert "Which quarter?" in html and 'name="response"' in html  # free text too
    assert decide_on_page(client, row, {"choice": "Q3 2025"}).status_code == 302
    row.refresh_from_db()
    assert (row.response_type, row.response_args) == ("response", "Q3 2025")


def test_after_deciding_the_next_pending_item_opens(paused, client_for, reviewer, requester):
    thread, (first, second) = paused(
        user=requester, values=[human_interrupt("a"), human_interrupt("b")]
    )
    other, (elsewhere,) = paused(user=requester, values=[human_interrupt("c")])
    client = client_for(reviewer)
    response = decide_on_page(client, first, {"type": "accept"})
    assert response["Location"] == f"/threads/{thread.pk}/#interrupt-{second.pk}"
    response = decide_on_page(client, second, {"type": "ignore"}, follow=True)
    # The last of two parallel items: the thread stays open to show the resume, and
    # links the next item.
    assert response.redirect_chain[0][0] == f"/threads/{thread.pk}/"
    page = response.content.decode()
    assert "Ignored: b (item 2 of 2) on “approval”; all 2 answered, the agent resumes." in page
    assert f'href="/threads/{other.pk}/#interrupt-{elsewhere.pk}"' in page
    # A single item stays on its thread too, and offers the next one by name.
    _, (single,) = paused(user=requester, values=[human_interrupt("d")])
    response = decide_on_page(client, single, {"type": "ignore"}, follow=True)
    assert response.redirect_chain[0][0] == f"/threads/{single.thread_id}/"
    page = response.content.decode()
    assert "Ignored: d on “approval”" in page
    assert 'id="next-item"' in page
    assert f'href="/threads/{other.pk}/#interrupt-{elsewhere.pk}"' in page
    response = decide_on_page(client, elsewhere, {"type": "accept"})
    assert response["Location"] == f"/threads/{other.pk}/"


def test_n_opens_the_newest_item_routed_to_me(
    paused, client_for, reviewer, finance_reviewer, requester
):
    _, (older,) = paused(user=requester, values=[human_interrupt("a")])
    thread, (newer,) = paused(user=requester, values=[human_interrupt("b")])
    response = client_for(reviewer).get("/interrupts/next/")
    assert response["Location"] == f"/threads/{thread.pk}/#interrupt-{newer.pk}"
    response = client_for(finance_reviewer).get("/interrupts/next/", follow=True)
    assert "Nothing waits for you." in response.content.decode()


def test_the_losing_reviewer_sees_who_answered(
    paused, client_for, reviewer, second_reviewer, requester
):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    assert decide_on_page(client_for(reviewer), row, {"type": "accept"}).status_code == 302
    loser = client_for(second_reviewer)
    response = decide_on_page(loser, row, {"type": "ignore"}, follow=True)
    assert "Already answered by rita." in response.content.decode()
    as_json = decide_on_page(loser, row, {"type": "accept"}, HTTP_ACCEPT="application/json")
    assert as_json.status_code == 409
    assert as_json.json() == {"error": "Already answered by rita."}
    assert Run.objects.filter(thread=thread, kind="resume").count() == 1


def test_outsiders_get_404_and_requesters_cannot_decide(
    paused, client_for, outsider, requester, reviewer
):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    assert client_for(outsider).get(f"/threads/{thread.pk}/").status_code == 404
    assert decide_on_page(client_for(outsider), row, {"type": "accept"}).status_code == 404
    page = client_for(requester).get(f"/threads/{thread.pk}/").content.decode()
    assert "Waiting for a reviewer in" in card(page, row)
    assert "<form" not in card(page, row)
    response = decide_on_page(client_for(requester), row, {"type": "accept"}, follow=True)
    assert "not in" in response.content.decode()  # routed to a group the requester is not in
    row.refresh_from_db()
    assert row.status == "pending"


XSS = '<script>alert("x")</script><img src=x onerror="alert(1)"><a href="javascript:alert(2)">y</a>'


def test_description_and_args_render_inert(paused, client_for, reviewer, requester):
    value = human_interrupt(
        "send_<b onmouseover=alert(1)>mail</b>",
        {XSS: XSS, "nested": {"html": XSS}, "n": 1},
        description=f"**Careful** {XSS} <svg onload=alert(3)>",
    )
    thread, (row,) = paused(user=requester, values=[value], title=XSS)
    client = client_for(reviewer)
    for url in (f"/threads/{thread.pk}/", "/", "/?tab=all"):
        html = client.get(url).content.decode()
        assert dangerous_markup(html) == [], url
    page = client.get(f"/threads/{thread.pk}/").content.decode()
    assert "<strong>Careful</strong>" in page  # markdown still renders
    assert "&lt;script&gt;" in page  # the payload is shown as text
    live = client.get(f"/threads/{thread.pk}/live/").json()
    assert all(dangerous_markup(h) == [] for h in live["sections"].values())
    assert dangerous_markup(live["interrupts"][0]["html"]) == []


def test_socket_fragments_render_inert(paused, requester):
    from hitl.review.consumers import render_inbox_interrupt, render_interrupt_card

    _, (row,) = paused(
        user=requester, values=[human_interrupt("x", {"a": XSS}, description=XSS)], title=XSS
    )
    rendered = render_inbox_interrupt(str(row.pk))
    assert dangerous_markup(rendered["html"]) == []
    assert dangerous_markup(render_interrupt_card(str(row.pk), True)) == []


def test_conversation_comes_from_the_checkpoint_messages(
    manual_runs, client_for, reviewer, requester
):
    from hitl.core import runs

    run = runs.run_start(graph="demo", input={}, user=requester, title="report")
    assert manual_runs(run) == "interrupted"
    page = client_for(reviewer).get(f"/threads/{run.thread_id}/").content.decode()
    conversation = page[page.index('id="section-conversation"') :]
    assert "Before I build the report" in conversation  # the agent's message
    assert "<code>ask_clarification</code>" in conversation  # its tool call, collapsible
    assert '<details class="tool-call">' in conversation
    row = HumanInterrupt.objects.get(thread_id=run.thread_id)
    assert "Which quarter should the sales report cover?" in card(page, row)


def test_final_result_and_run_history(paused, client_for, reviewer, requester):
    thread, _ = paused(user=requester, values=[human_interrupt()])
    Run.objects.filter(thread=thread).update(
        final_result={
            "summary": "Sent the report.",
            "email_sent": True,
            "files": ["/mnt/user-data/outputs/a.csv"],
        }
    )
    page = client_for(reviewer).get(f"/threads/{thread.pk}/").content.decode()
    result = page[page.index('id="final-result"') :]
    assert "Sent the report." in result and "a.csv" in result and ">yes<" in result
    section = page[page.index('id="section-runs"') :]
    assert "start" in section and "interrupted" in section


@pytest.fixture
def files_thread(paused, requester, settings, tmp_path):
    from hitl.core.files.storage import thread_files

    settings.MEDIA_ROOT = str(tmp_path / "media")
    thread, _ = paused(user=requester, values=[human_interrupt()])
    store = thread_files(thread.pk)
    payloads = {
        "chart.png": (b"\x89PNG\r\n\x1a\n" + b"0" * 64, "image/png"),
        "table.csv": (b"name,score\n<b>ann</b>,3\nbob,4\n", "text/csv"),
        "page.html": (b"<script>alert(1)</script>", "text/html"),
        "logo.svg": (
            b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
            "image/svg+xml",
        ),
    }
    artifacts = {}
    for name, (data, mime) in payloads.items():
        path = f"/mnt/user-data/outputs/{name}"
        store.write_bytes(path, data)
        artifacts[name] = Artifact.objects.create(
            thread=thread, path=path, size=len(data), mime=mime
        )
    return thread, artifacts


def test_artifacts_preview(files_thread, client_for, reviewer):
    thread, artifacts = files_thread
    page = client_for(reviewer).get(f"/threads/{thread.pk}/").content.decode()
    files = page[page.index("artifacts") :]
    png = artifacts["chart.png"]
    assert f'<img src="/threads/{thread.pk}/files/{png.pk}/?inline=1"' in files
    assert "<th>name</th><th>score</th>" in files.replace("\n", "")
    assert "<td>&lt;b&gt;ann&lt;/b&gt;</td>" in files
    assert dangerous_markup(page) == []


def test_downloads_are_authorized_and_never_render_active_content(
    files_thread, client_for, reviewer, outsider
):
    thread, artifacts = files_thread
    client = client_for(reviewer)

    def url(name, inline=False):
        return f"/threads/{thread.pk}/files/{artifacts[name].pk}/" + ("?inline=1" if inline else "")

    image = client.get(url("chart.png", inline=True))
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image["Content-Disposition"].startswith("inline")
    assert image["X-Content-Type-Options"] == "nosniff"
    for name in ("page.html", "logo.svg"):
        response = client.get(url(name, inline=True))
        assert response.status_code == 200
        assert response["Content-Disposition"].startswith("attachment"), name
        assert "html" not in response["Content-Type"] and "svg" not in response["Content-Type"]
        assert response["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in response["Content-Security-Policy"]
    assert client_for(outsider).get(url("chart.png")).status_code == 404
    other_thread_artifact = f"/threads/{thread.pk}/files/{thread.pk}/"
    assert client.get(other_thread_artifact).status_code == 404


def test_a_file_gone_from_storage_is_410_not_500(files_thread, client_for, reviewer):
    thread, artifacts = files_thread
    Artifact.objects.filter(pk=artifacts["chart.png"].pk).update(
        path="/mnt/user-data/outputs/missing.png"
    )
    response = client_for(reviewer).get(f"/threads/{thread.pk}/files/{artifacts['chart.png'].pk}/")
    assert response.status_code == 410


def test_thread_page_shows_the_audit_trail_with_proposed_and_edited_args(
    paused, client_for, reviewer, requester
):
    from hitl.core import decisions
    from tests.review.conftest import open_interrupts

    thread, (row,) = open_interrupts(
        user=requester, values=[human_interrupt(args={"to": "old@example.com", "subject": "Q3"})]
    )
    decisions.interrupt_resolve(
        interrupt_id=row.pk,
        user=reviewer,
        response_type="edit",
        args={"action": row.action, "args": {"to": "new@example.com", "subject": "Q3"}},
    )
    html = client_for(requester).get(f"/threads/{thread.pk}/").content.decode()
    trail = html[html.index('id="audit-trail"') :]
    assert "old@example.com" in trail and "new@example.com" in trail
    assert reviewer.username in trail
