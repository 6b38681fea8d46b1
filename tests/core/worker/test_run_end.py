"""Waiters answer from the end a worker announced: the same answer a read would give."""

from __future__ import annotations

import pytest

from hitl.api.langgraph import serializers
from hitl.api.langgraph import services as lg_services
from hitl.core.live import events
from hitl.core.live.waiting import is_run_end
from hitl.core.models import DecisionRule, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def announced(monkeypatch):
    """Every thread.changed this test publishes, with the run end it carried."""
    seen: list[dict] = []
    real = events.publish_thread_changed

    def record(**kwargs):
        seen.append(kwargs)
        real(**kwargs)

    monkeypatch.setattr(events, "publish_thread_changed", record)
    return seen


def run_to_end(manual_runs, django_capture_on_commit_callbacks, run) -> str:
    with django_capture_on_commit_callbacks(execute=True):
        return manual_runs(run)


def test_a_pause_and_an_end_are_announced_with_the_answer_a_read_gives(
    manual_runs, django_capture_on_commit_callbacks, requester, reviewers_group, announced
):
    requester.groups.add(reviewers_group)  # answers its own pause, as an API client does
    thread = lg_services.thread_create(user=requester)
    with django_capture_on_commit_callbacks(execute=True):
        first = lg_services.run_create(
            user=requester, assistant_id="approval", thread=thread, input={"request": "q3"}
        )
    assert run_to_end(manual_runs, django_capture_on_commit_callbacks, first) == "interrupted"
    paused = announced[-1]["run_end"]
    first = Run.objects.select_related("thread").get(pk=first.pk)
    assert paused["run_id"] == str(first.pk) and paused["status"] == "interrupted"
    answer = serializers.output_of(first, paused["values"], paused["interrupts"])
    assert answer == serializers.run_output(first)
    assert answer["__interrupt__"]

    thread.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        second = lg_services.run_create(
            user=requester,
            assistant_id="approval",
            thread=thread,
            command={"resume": [{"type": "accept"}]},
        )
    assert run_to_end(manual_runs, django_capture_on_commit_callbacks, second) == "success"
    done = announced[-1]["run_end"]
    second = Run.objects.select_related("thread").get(pk=second.pk)
    assert serializers.output_of(second, done["values"], done["interrupts"]) == (
        serializers.run_output(second)
    )


def test_a_pause_a_rule_decided_is_announced_without_an_answer(
    manual_runs, django_capture_on_commit_callbacks, requester, announced
):
    DecisionRule.objects.create(
        name="auto", outcome="accept", mode=DecisionRule.Mode.LIVE, action="*"
    )
    thread = lg_services.thread_create(user=requester)
    run = lg_services.run_create(user=requester, assistant_id="approval", thread=thread, input={})
    run_to_end(manual_runs, django_capture_on_commit_callbacks, run)
    [end] = [a for a in announced if a.get("run_ended")]
    # The rule queued the resume in the same transaction: the thread is busy again, and
    # the waiter must read what is left pending (nothing) itself.
    assert end["status"] == "busy" and end["run_end"] is None
    assert is_run_end({"type": "thread.changed", "status": "busy", "run_ended": True})


def test_a_waiter_is_not_woken_by_a_run_starting():
    assert not is_run_end({"type": "thread.changed", "status": "busy"})
    for status in ("interrupted", "done", "error", "idle"):
        assert is_run_end({"type": "thread.changed", "status": status})
