"""Proposed values as the edit form shows them: JSON, never Python text."""

from __future__ import annotations

from hitl.core.models import HumanInterrupt
from tests.review.conftest import human_interrupt


def card_html(html: str, row) -> str:
    start = html.index(f'id="interrupt-{row.pk}"')
    return html[start : html.index("</article>", start)]


def test_a_card_with_nothing_editable_does_not_offer_an_edit(paused, client_for, reviewer):
    thread, (row,) = paused(user=reviewer, values=[human_interrupt("archive", allow_edit=False)])
    card = card_html(client_for(reviewer).get(f"/threads/{thread.pk}/").content.decode(), row)
    assert "edit any value" not in card and "Submit edit" not in card
    assert '<dl class="args readonly">' in card


def test_a_value_of_another_type_than_its_schema_is_edited_as_json(paused, client_for, reviewer):
    value = human_interrupt("post_note", {"body": {"list": [1, "x"]}, "n": "5"})
    value["args_schema"] = {
        "type": "object",
        "properties": {"body": {"type": "string"}, "n": {"type": "integer"}},
    }
    thread, (row,) = paused(user=reviewer, values=[value])
    client = client_for(reviewer)
    card = card_html(client.get(f"/threads/{thread.pk}/").content.decode(), row)
    assert "{&#x27;list&#x27;" not in card and "{'list'" not in card
    assert "&quot;list&quot;: [" in card
    assert "proposed an object where the tool expects a string" in card
    assert "proposed a string where the tool expects an integer" in card
    # Sent back unchanged, the schema refuses it at the field and nothing is decided.
    response = client.post(
        f"/interrupts/{row.pk}/decide/",
        {"type": "edit", "arg_0": '{"list": [1, "x"]}', "arg_1": '"5"'},
    )
    assert response.status_code == 400
    assert "schema" in response.content.decode()
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
