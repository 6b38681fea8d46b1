"""Run webhooks: signed POSTs on interrupt and completion, retried with backoff."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from hitl.core.models import HumanInterrupt, Run, Thread, WebhookDelivery
from hitl.core.net import webhook_urls
from hitl.ops import webhooks
from tests.api.conftest import WEBHOOK_SECRET, sdk_client
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def test_interrupt_and_completion_are_posted_signed(live, reviewer, receiver, api_for):
    client = sdk_client(live.base_url, reviewer)
    thread = client.threads.create()
    run = client.runs.create(
        thread["thread_id"],
        "approval",
        input={"request": "q3"},
        webhook=receiver.url,
        metadata={"ticket": 7},
    )
    wait_for(lambda: receiver.events() == ["run.interrupted"], what="the interrupt webhook")
    (hit,) = receiver.requests
    assert webhooks.verify(
        hit["body"], hit["headers"]["x-hitl-signature"], secret=WEBHOOK_SECRET.encode()
    )
    # Standard Webhooks: a receiver verifies with the standardwebhooks library.
    assert Webhook(webhooks.receiver_secret()).verify(hit["body"], hit["headers"])
    assert hit["headers"]["x-hitl-event"] == "run.interrupted"
    payload = hit["json"]
    assert (payload["run_id"], payload["thread_id"]) == (run["run_id"], thread["thread_id"])
    assert payload["metadata"] == {"ticket": 7}
    (item,) = payload["interrupts"]
    row = HumanInterrupt.objects.get(thread_id=thread["thread_id"])
    assert (item["id"], item["action_request"]["action"]) == (str(row.pk), "send_email")

    # A reviewer answers in the UI's API: the resume run inherits the webhook.
    answer = api_for(reviewer).post(f"/api/v1/interrupts/{row.pk}/decision", {"type": "accept"})
    assert answer.status_code == 200, answer.content
    wait_for(
        lambda: receiver.events() == ["run.interrupted", "run.success"],
        what="the completion webhook",
    )
    done = receiver.requests[-1]["json"]
    assert done["values"]["sent"] is True
    assert done["run_id"] == str(Run.objects.get(thread_id=thread["thread_id"], kind="resume").pk)
    expected = [("run.interrupted", "delivered", 1, 200), ("run.success", "delivered", 1, 200)]

    def recorded():
        deliveries = WebhookDelivery.objects.order_by("created_at")
        return [(d.event, d.status, d.attempts, d.response_status) for d in deliveries]

    # The worker records the answer after the receiver has it: wait for that commit.
    wait_for(lambda: recorded() == expected, what="the deliveries recorded")
    assert recorded() == expected


def test_a_failing_receiver_is_retried_with_backoff(live, reviewer, receiver):
    receiver.fail_first = 2
    client = sdk_client(live.base_url, reviewer)
    thread = client.threads.create()
    started = time.monotonic()
    client.runs.create(thread["thread_id"], "raw_question", input={}, webhook=receiver.url)
    delivery = wait_for(
        lambda: WebhookDelivery.objects.filter(status="delivered").first(), what="a delivery"
    )
    # Backoff 0.2 s then 0.4 s before the third, successful, try.
    assert time.monotonic() - started >= 0.6
    assert [r["status"] for r in receiver.requests] == [500, 500, 200]
    assert (delivery.attempts, delivery.response_status, delivery.last_error) == (3, 200, "")
    # Every try carried the same delivery id, so receivers can drop duplicates.
    assert len({r["headers"]["x-hitl-delivery"] for r in receiver.requests}) == 1


def test_a_delivery_gives_up_after_the_last_attempt(db, settings, requester):
    settings.HITL_WEBHOOK_HOSTS = ["127.0.0.1:9"]
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    settings.HITL_WEBHOOK_MAX_ATTEMPTS = 3
    settings.HITL_WEBHOOK_BACKOFF_SECONDS = 0.5
    thread = Thread.objects.create(graph="approval", requester=requester)
    run = Run.objects.create(
        thread=thread, kind="start", status="error", webhook="http://127.0.0.1:9/x"
    )
    delivery = WebhookDelivery.objects.create(
        run=run, event="run.error", url=run.webhook, payload={}
    )

    retries = [webhooks.delivery_attempt(delivery_id=delivery.pk) for _ in range(3)]

    assert retries == [0.5, 1.0, None]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert "refused" in delivery.last_error.lower()
    assert webhooks.delivery_attempt(delivery_id=delivery.pk) is None  # nothing left to do


def test_a_host_off_the_allow_list_is_refused(live, reviewer):
    client = sdk_client(live.base_url, reviewer)
    thread = client.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(
            thread["thread_id"], "approval", input={}, webhook="http://evil.example.com/x"
        )
    assert refused.value.response.status_code == 400
    assert "evil.example.com" in refused.value.response.json()["detail"]
    assert not Run.objects.exists()


def test_signatures_reject_tampering_and_replays():
    body = json.dumps({"event": "run.success"}).encode()
    now = int(time.time())
    header = webhooks.sign(body, now, b"k")
    assert webhooks.verify(body, header, secret=b"k")
    assert not webhooks.verify(body + b" ", header, secret=b"k")
    assert not webhooks.verify(body, header, secret=b"other")
    assert not webhooks.verify(body, webhooks.sign(body, now - 3600, b"k"), secret=b"k")
    assert not webhooks.verify(body, "garbage", secret=b"k")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://hooks.example.com/a", True),
        ("https://a.hooks.example.com/a", True),
        ("https://example.com/a", False),
        ("ftp://hooks.example.com/a", False),
        ("https://user:pw@hooks.example.com/a", False),
        ("not a url", False),
    ],
)
def test_the_allow_list_matches_hosts_and_subdomains(settings, url, ok):
    settings.HITL_WEBHOOK_HOSTS = ["hooks.example.com", "*.hooks.example.com"]
    if ok:
        assert webhook_urls.webhook_check_url(url) == url
    else:
        with pytest.raises(webhook_urls.WebhookNotAllowed):
            webhook_urls.webhook_check_url(url)
