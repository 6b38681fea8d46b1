import pytest

from hitl.models import HumanInterrupt, Run, Thread
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def test_celery_worker_runs_an_approval_cycle(celery_worker, api_for, reviewer):
    api = api_for(reviewer)
    started = api.post("/api/v1/threads", {"graph": "approval", "input": {"request": "q3"}}).json()
    thread_id = started["thread_id"]
    row = wait_for(
        lambda: HumanInterrupt.objects.filter(thread_id=thread_id).first(), what="interrupt row"
    )
    assert row.action == "send_email"
    answer = api.post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"})
    assert answer.status_code == 200, answer.content
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", what="thread done")
    resume = Run.objects.get(thread_id=thread_id, kind="resume")
    assert resume.result["decision"] == {"type": "accept", "args": None}
