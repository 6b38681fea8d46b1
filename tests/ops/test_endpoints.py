"""/healthz, /metrics and the analytics page, through Django's test client."""

from __future__ import annotations

import os
import re
import socket
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db.models import F
from prometheus_client.parser import text_string_to_metric_families

from hitl.core import decisions, runs
from hitl.core.models import HumanInterrupt, Run
from tests.conftest import free_port

pytestmark = pytest.mark.usefixtures("ops_graphs")


def samples(body: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_healthz_reports_each_dependency(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["checkpointer"] == "ok"
    assert body["checks"]["redis"] in ("ok", "not used (embedded)")


def test_healthz_fails_when_redis_is_down(client, db, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert "ConnectionError" in body["checks"]["redis"]


def seed(manual_runs, requester, reviewer, finance_group):
    rows = []
    for group in (None, "finance", "finance"):
        run = runs.run_start(
            graph="ops_gated",
            input={"request": {"reviewer_group": group} if group else {}},
            user=requester,
        )
        manual_runs(run)
        rows.append(HumanInterrupt.objects.get(thread_id=run.thread_id))
    decisions.interrupt_resolve(interrupt_id=rows[0].pk, user=reviewer, response_type="accept")
    # Pretend the answer took ten minutes.
    HumanInterrupt.objects.filter(pk=rows[0].pk).update(
        created_at=F("responded_at") - timedelta(minutes=10)
    )
    return rows


def test_metrics_expose_runs_interrupts_queues_and_latencies(
    client, manual_runs, requester, reviewer, finance_group, settings
):
    settings.HITL_METRICS_PUBLIC = True
    seed(manual_runs, requester, reviewer, finance_group)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = samples(response.content.decode())
    assert found[("hitl_runs", (("status", "interrupted"),))] == 3
    assert found[("hitl_runs", (("status", "queued"),))] == 1  # the resume (manual executor)
    assert found[("hitl_interrupts_pending", (("group", "finance"),))] == 2
    assert ("hitl_interrupts_pending", (("group", "reviewers"),)) not in found
    assert found[("hitl_decisions", (("automatic", "false"), ("type", "accept")))] == 1
    latency = {
        labels: value
        for (name, labels), value in found.items()
        if name == "hitl_time_to_decision_seconds_bucket"
    }
    assert latency[(("group", "reviewers"), ("le", "300.0"))] == 0
    assert latency[(("group", "reviewers"), ("le", "900.0"))] == 1
    assert found[("hitl_time_to_decision_seconds_count", (("group", "reviewers"),))] == 1
    assert found[("hitl_time_to_decision_seconds_sum", (("group", "reviewers"),))] >= 600
    assert found[("hitl_run_duration_seconds_count", (("graph", "ops_gated"),))] == 3
    assert ("hitl_queue_depth", (("queue", "runs"),)) in found
    assert ("hitl_workers", ()) in found
    assert all(value == 0 for (name, _), value in found.items() if name == "hitl_scrape_error"), (
        found
    )


def test_metrics_report_this_process_connections_by_pool(client, db, settings):
    settings.HITL_METRICS_PUBLIC = True
    found = samples(client.get("/metrics").content.decode())
    me = f"web@{socket.gethostname()}:{os.getpid()}"
    open_now = {
        dict(labels)["pool"]: value
        for (name, labels), value in found.items()
        if name == "hitl_db_connections" and dict(labels)["process"] == me
    }
    assert set(open_now) == {"django", "checkpointer", "store"}
    assert open_now["django"] >= 1  # this request's
    assert open_now["checkpointer"] >= 1  # the test session's checkpointer (and store)
    assert open_now["store"] == 0  # no HITL_STORE_URL: the store is on the checkpointer's pool
    budget = found[("hitl_db_connections_budget", (("process", me),))]
    # Django's pool and at least the sync checkpointer's.
    assert (
        budget
        >= settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]
        + settings.HITL_CHECKPOINT_POOL_SIZE
    )
    assert sum(open_now.values()) <= found[("hitl_db_connections_peak", (("process", me),))]
    assert found[("hitl_db_connections_peak", (("process", me),))] <= budget


def test_metrics_survive_a_broken_part(client, db, settings):
    settings.HITL_METRICS_PUBLIC = True
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    found = samples(client.get("/metrics").content.decode())
    assert found[("hitl_scrape_error", (("part", "queues"),))] == 1
    assert found[("hitl_scrape_error", (("part", "database"),))] == 0
    assert ("hitl_runs", (("status", "queued"),)) in found


def test_metrics_token_is_enforced_when_set(client, db, settings):
    settings.HITL_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


def test_metrics_are_closed_unless_a_token_is_set_or_they_are_opened(client, db, settings):
    """Group and worker names are not for anyone who can reach the port."""
    assert (settings.HITL_METRICS_TOKEN, settings.HITL_METRICS_PUBLIC) == ("", False)
    closed = client.get("/metrics")
    assert closed.status_code == 404
    assert b"HITL_METRICS_TOKEN" in closed.content and b"hitl_" not in closed.content
    settings.HITL_METRICS_PUBLIC = True
    assert b"hitl_runs" in client.get("/metrics").content


def test_analytics_draws_decisions_and_latency_as_svg(
    client, admin_user, manual_runs, requester, reviewer, finance_group
):
    rows = seed(manual_runs, requester, reviewer, finance_group)
    finance_reviewer = type(reviewer).objects.create(username="fin")
    finance_reviewer.groups.add(finance_group)
    decisions.interrupt_resolve(
        interrupt_id=rows[1].pk, user=finance_reviewer, response_type="response", args="No."
    )
    client.force_login(admin_user)
    response = client.get("/analytics/", {"days": "7"})
    assert response.status_code == 200
    html = response.content.decode()
    chart = html[html.index('<svg id="decisions-chart"') : html.index("</svg>")]
    bars = re.findall(r"<title>([^<]+)</title>", chart)
    assert "reviewers · ops_gated: 1 accept" in bars
    assert "finance · ops_gated: 1 response" in bars
    latency = html[html.index('<svg id="latency-chart"') :]
    assert "p50 10.0m" in latency  # the ten-minute answer
    assert 'value="7" selected' in html


def test_analytics_is_for_admins_and_review_all(client, reviewer, db):
    client.force_login(reviewer)
    assert client.get("/analytics/").status_code == 403
    assert client.get("/analytics/", {"days": "x"}).status_code == 403
    client.logout()
    assert client.get("/analytics/").status_code == 302


def test_analytics_with_no_data_and_bad_input(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/analytics/", {"days": "banana"})
    assert response.status_code == 200
    assert b"No decisions in this period." in response.content
    assert Group.objects.count() >= 0 and Run.objects.count() == 0
