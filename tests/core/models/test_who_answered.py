"""Who answered an interrupt, in words: one property that every surface names it by."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from hitl.core.models import HumanInterrupt


def test_a_reviewer_is_named_by_username():
    row = HumanInterrupt(responded_by=get_user_model()(username="rita"))
    assert row.answered_by == "rita"


def test_a_rule_is_named_with_its_version():
    row = HumanInterrupt(decided_by_rule="internal-mail v2")
    assert row.answered_by == "rule internal-mail v2"


def test_an_item_no_one_answered_names_no_one():
    # Pending, or expired by the system: the surfaces say "someone" or nothing.
    assert HumanInterrupt().answered_by == ""
