"""A JSON column gives back the value stored, once decoded: text that looks like JSON stays text.

On PostgreSQL the column is the `json` type, which psycopg already decodes; decoding a
string value a second time turned the answer "12" into the number 12, `{"a": 1}` into an
object, and text holding a 5,000-digit number into a 500.
"""

from __future__ import annotations

import pytest

from hitl.core.decisions import interrupt_resolve
from hitl.core.models import HumanInterrupt
from tests.review.conftest import human_interrupt, open_interrupts


@pytest.mark.parametrize(
    "text", ["12", '{"a": 1}', "[1, 2]", "null", "true", '"quoted"', '{"a": 1' + "0" * 5000 + "}"]
)
def test_a_text_answer_that_looks_like_json_comes_back_as_the_same_text(
    django_capture_on_commit_callbacks, settings, requester, reviewer, text
):
    settings.HITL_EXECUTOR = "manual"
    with django_capture_on_commit_callbacks(execute=True):
        _, (row,) = open_interrupts(user=requester, values=[human_interrupt()])
    with django_capture_on_commit_callbacks(execute=True):
        interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="response", args=text)
    stored = HumanInterrupt.objects.get(pk=row.pk)
    assert stored.response_args == text
    assert (
        HumanInterrupt.objects.filter(pk=row.pk).values_list("response_args", flat=True)[0] == text
    )


def test_objects_and_numbers_still_come_back_as_themselves(requester, settings):
    settings.HITL_EXECUTOR = "manual"
    _, (row,) = open_interrupts(
        user=requester, values=[human_interrupt("send", {"b": 1, "a": [2.5, None]})]
    )
    stored = HumanInterrupt.objects.get(pk=row.pk)
    assert stored.args == {"b": 1, "a": [2.5, None]} and list(stored.args) == ["b", "a"]
