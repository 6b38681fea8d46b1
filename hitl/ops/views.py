"""Operator endpoints: /healthz, Prometheus /metrics and the analytics page."""

from __future__ import annotations

import hmac
import json
import logging
import math
import os
import socket
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Q, Sum
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from hitl.core.access.permissions import user_can_review_all
from hitl.core.db.connections import process_connections
from hitl.core.models import HumanInterrupt, RemoteDeployment, Run
from hitl.core.runs.graphs import checkpointer
from hitl.ops.maintenance import CONNECTIONS_KEY, HEARTBEAT_KEY
from hitl.ops.rule_analytics import automation_context

log = logging.getLogger(__name__)

# Seconds. Decisions take minutes to days; runs take seconds to minutes.
DECISION_BUCKETS = (5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600)
RUN_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
QUEUES = ("runs", "default")
# kombu's Redis transport keeps a list per queue and priority step.
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)


# --- /healthz ---------------------------------------------------------------------------


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _check_redis() -> None:
    client = _redis(settings.REDIS_URL)
    try:
        client.ping()
    finally:
        client.close()


def _check_checkpointer() -> None:
    # A real read on the checkpoint tables: proves the pool, the schema and the grants.
    checkpointer().get_tuple({"configurable": {"thread_id": "hitl-healthz", "checkpoint_ns": ""}})


@never_cache
@require_GET
def healthz(request):
    """200 when the database, Redis and the checkpointer answer; 503 otherwise."""
    checks: dict[str, str] = {}
    probes = [("database", _check_database), ("checkpointer", _check_checkpointer)]
    if settings.REDIS_URL:
        probes.insert(1, ("redis", _check_redis))
    else:
        checks["redis"] = "not used (embedded)"
    for name, probe in probes:
        try:
            probe()
        except Exception as exc:
            # The details go to the log; the open endpoint names only the failure.
            log.warning("healthz: %s failed: %s", name, _short(exc))
            checks[name] = f"error: {type(exc).__name__}"
        else:
            checks[name] = "ok"
    healthy = all(v == "ok" or v.startswith("not used") for v in checks.values())
    body: dict[str, Any] = {"status": "ok" if healthy else "unavailable", "checks": checks}
    if healthy:
        # Shown, not counted: a deployment that is away must not take HITL out of its
        # load balancer (its decisions wait, pending delivery).
        body["remote"] = _remote_health()
    return JsonResponse(body, status=200 if healthy else 503)


def _remote_health() -> dict[str, str]:
    """Up or down, nothing more: the endpoint is open, and a failure's words may repeat
    what a deployment (or whatever its URL reached) answered. The admin row has them."""
    return {
        name: "up" if ok and not error else "down"
        for name, error, ok in RemoteDeployment.objects.filter(enabled=True)
        .order_by("name")
        .values_list("name", "last_error", "last_ok_at")
    }


# --- /metrics ---------------------------------------------------------------------------


def _duration(end: str, start: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(end) - F(start), output_field=DurationField())


def _histogram(
    name: str, doc: str, label: str, qs, buckets: tuple[float, ...]
) -> HistogramMetricFamily:
    """A histogram over `qs` (annotated with `d`, grouped by `label`) in one query."""
    aggregates: dict[str, Any] = {
        f"le_{i}": Count("pk", filter=Q(d__lte=timedelta(seconds=b))) for i, b in enumerate(buckets)
    }
    aggregates.update(total=Count("pk"), total_seconds=Sum("d"))
    family = HistogramMetricFamily(name, doc, labels=[label])
    for row in qs.values("label").annotate(**aggregates).order_by("label"):
        counts = [(str(float(b)), row[f"le_{i}"]) for i, b in enumerate(buckets)]
        counts.append(("+Inf", row["total"]))
        total = row["total_seconds"]
        family.add_metric(
            [row["label"] or "none"],
            counts,
            sum_value=total.total_seconds() if total else 0.0,
        )
    return family


class HitlCollector:
    """Reads the numbers at scrape time: the database and Redis are the source of truth."""

    def collect(self):
        errors = GaugeMetricFamily(
            "hitl_scrape_error", "1 when a part of this scrape failed", labels=["part"]
        )
        for part, produce in (
            ("database", self._database),
            ("queues", self._queues),
            ("workers", self._workers),
            ("connections", self._connections),
        ):
            try:
                yield from produce()
                errors.add_metric([part], 0)
            except Exception as exc:
                log.warning("metrics: %s failed: %s", part, _short(exc))
                errors.add_metric([part], 1)
        yield errors

    def _database(self):
        runs = GaugeMetricFamily("hitl_runs", "Runs by status", labels=["status"])
        counts = dict(Run.objects.values_list("status").annotate(n=Count("pk")).order_by())
        for status in Run.Status.values:
            runs.add_metric([status], counts.get(status, 0))
        yield runs

        pending = GaugeMetricFamily(
            "hitl_interrupts_pending", "Pending interrupts by reviewer group", labels=["group"]
        )
        for name, n in (
            HumanInterrupt.objects.pending()
            .values_list("reviewer_group__name")
            .annotate(n=Count("pk"))
            .order_by()
        ):
            pending.add_metric([name or "none"], n)
        yield pending

        decisions = GaugeMetricFamily(
            "hitl_decisions", "Answered interrupts by decision type", labels=["type", "automatic"]
        )
        for status, response_type, n in (
            HumanInterrupt.objects.exclude(response_type="")
            .values_list("status", "response_type")
            .annotate(n=Count("pk"))
            .order_by()
        ):
            automatic = "true" if status == HumanInterrupt.Status.EXPIRED else "false"
            decisions.add_metric([response_type, automatic], n)
        yield decisions

        yield _histogram(
            "hitl_time_to_decision_seconds",
            "From interrupt to a reviewer's answer",
            "group",
            HumanInterrupt.objects.filter(
                status=HumanInterrupt.Status.RESOLVED, responded_at__isnull=False
            ).annotate(d=_duration("responded_at", "created_at"), label=F("reviewer_group__name")),
            DECISION_BUCKETS,
        )
        yield _histogram(
            "hitl_run_duration_seconds",
            "From a run's first claim to its end (interrupted or done)",
            "graph",
            Run.objects.filter(
                status__in=[Run.Status.SUCCESS, Run.Status.INTERRUPTED, Run.Status.ERROR],
                started_at__isnull=False,
                finished_at__isnull=False,
            ).annotate(d=_duration("finished_at", "started_at"), label=F("thread__graph")),
            RUN_BUCKETS,
        )

        leases = GaugeMetricFamily(
            "hitl_run_lease_expires_timestamp_seconds",
            "Lease expiry of running runs by worker (renewed by the worker's heartbeat)",
            labels=["worker"],
        )
        for owner, expires in (
            Run.objects.filter(status=Run.Status.RUNNING, lease_expires_at__isnull=False)
            .values_list("lease_owner")
            .annotate(latest=Max("lease_expires_at"))
            .order_by()
        ):
            leases.add_metric([owner or "none"], expires.timestamp())
        yield leases

    def _queues(self):
        depth = GaugeMetricFamily(
            "hitl_queue_depth", "Messages waiting in a broker queue", labels=["queue"]
        )
        broker = settings.CELERY_BROKER_URL
        if broker.startswith(("redis://", "rediss://")):
            client = _redis(broker)
            try:
                pipe = client.pipeline()
                for queue in QUEUES:
                    for suffix in _PRIORITY_SUFFIXES:
                        pipe.llen(queue + suffix)
                lengths = pipe.execute()
            finally:
                client.close()
            step = len(_PRIORITY_SUFFIXES)
            for i, queue in enumerate(QUEUES):
                depth.add_metric([queue], sum(lengths[i * step : (i + 1) * step]))
        else:
            queued = Run.objects.filter(status=Run.Status.QUEUED).count()
            depth.add_metric(["runs"], queued)
        yield depth

    def _workers(self):
        beats = GaugeMetricFamily(
            "hitl_worker_heartbeat_timestamp_seconds",
            "Last heartbeat of each live Celery worker",
            labels=["worker"],
        )
        alive = GaugeMetricFamily("hitl_workers", "Celery workers with a live heartbeat")
        count = 0
        if settings.REDIS_URL:
            client = _redis(settings.REDIS_URL)
            try:
                keys = sorted(client.scan_iter(match=HEARTBEAT_KEY.format("*"), count=200))
                values = client.mget(keys) if keys else []
            finally:
                client.close()
            prefix = HEARTBEAT_KEY.format("")
            for key, value in zip(keys, values, strict=True):
                if value is None:
                    continue
                count += 1
                beats.add_metric([key.decode()[len(prefix) :]], float(value))
        alive.add_metric([], count)
        yield beats
        yield alive

    def _connections(self):
        """Each process's Postgres connections: this one's now, each worker's as its
        last heartbeat reported them."""
        reports = {f"web@{socket.gethostname()}:{os.getpid()}": process_connections()}
        if settings.REDIS_URL:
            client = _redis(settings.REDIS_URL)
            try:
                keys = sorted(client.scan_iter(match=CONNECTIONS_KEY.format("*"), count=200))
                values = client.mget(keys) if keys else []
            finally:
                client.close()
            prefix = CONNECTIONS_KEY.format("")
            for key, value in zip(keys, values, strict=True):
                if value is not None:
                    reports[key.decode()[len(prefix) :]] = json.loads(value)
        now = GaugeMetricFamily(
            "hitl_db_connections",
            "Open Postgres connections of each HITL process, by pool",
            labels=["process", "pool"],
        )
        budget = GaugeMetricFamily(
            "hitl_db_connections_budget",
            "Postgres connections the open pools of each process may hold together",
            labels=["process"],
        )
        peak = GaugeMetricFamily(
            "hitl_db_connections_peak",
            "Most Postgres connections each process held at once since it started",
            labels=["process"],
        )
        for process, report in sorted(reports.items()):
            for pool, n in sorted(report["connections"].items()):
                now.add_metric([process, pool], n)
            budget.add_metric([process], report["budget"])
            peak.add_metric([process], report["peak"])
        yield now
        yield budget
        yield peak


_registry = CollectorRegistry(auto_describe=False)
_registry.register(HitlCollector())


@never_cache
@require_GET
def metrics(request):
    """Prometheus exposition: needs HITL_METRICS_TOKEN, or HITL_METRICS_PUBLIC to be open.

    Closed by default: the series name reviewer groups and worker hosts.
    """
    token = settings.HITL_METRICS_TOKEN
    if token:
        supplied = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(supplied.encode(), token.encode()):
            return HttpResponse("Missing or wrong metrics token.\n", status=401)
    elif not settings.HITL_METRICS_PUBLIC:
        return HttpResponse(
            "Metrics are off: set HITL_METRICS_TOKEN (or HITL_METRICS_PUBLIC=1).\n", status=404
        )
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)


# --- analytics ---------------------------------------------------------------------------

DECISION_COLORS = {
    "accept": "#2f9e44",
    "edit": "#1c7ed6",
    "response": "#f08c00",
    "ignore": "#868e96",
    "auto-ignore": "#ced4da",
    "auto-response": "#ffd8a8",
    "rule": "#9775fa",  # decided by a decision rule: not a person's accept
}
BAR_AREA = 520  # px available for bars in the SVG charts
# Phones get the same charts laid out for a 340-unit width (label above its bar), so that
# drawn at a phone's width their text stays about the page's size instead of shrinking
# to unreadable.
PHONE_WIDTH = 340
PHONE_BAR_AREA = 290


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def human_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _decisions_chart(since) -> dict[str, Any]:
    rows = (
        HumanInterrupt.objects.filter(responded_at__gte=since)
        .exclude(response_type="")
        .values_list(
            "reviewer_group__name", "thread__graph", "status", "response_type", "decided_by_rule"
        )
        .annotate(n=Count("pk"))
        .order_by()
    )
    bars: dict[tuple[str, str], dict[str, int]] = {}
    for group, graph, status, response_type, rule, n in rows:
        if rule:
            label = "rule"
        elif status == HumanInterrupt.Status.RESOLVED:
            label = response_type
        else:
            label = f"auto-{response_type}"
        counts = bars.setdefault((group or "none", graph), {})
        counts[label] = counts.get(label, 0) + n
    biggest = max((sum(c.values()) for c in bars.values()), default=0)
    chart = []
    for i, ((group, graph), counts) in enumerate(sorted(bars.items())):
        x = 0.0
        segments = []
        for kind in DECISION_COLORS:
            n = counts.get(kind, 0)
            if not n:
                continue
            width = BAR_AREA * n / biggest
            segments.append(
                {
                    "kind": kind,
                    "n": n,
                    "x": round(x, 1),
                    "width": round(width, 1),
                    "phone_x": round(x * PHONE_BAR_AREA / BAR_AREA, 1),
                    "phone_width": round(width * PHONE_BAR_AREA / BAR_AREA, 1),
                    "color": DECISION_COLORS[kind],
                }
            )
            x += width
        chart.append(
            {
                "group": group,
                "graph": graph,
                "total": sum(counts.values()),
                "y": i * 34,
                "segments": segments,
                "label_x": round(x + 6, 1),
                "phone_y": i * 46,
                "phone_label_x": round(x * PHONE_BAR_AREA / BAR_AREA + 6, 1),
                "counts": counts,
            }
        )
    return {
        "bars": chart,
        "height": max(len(chart) * 34, 34),
        "phone_height": max(len(chart) * 46, 46),
        "legend": [
            {
                "kind": k,
                "color": c,
                "x": (i % 4) * 130,
                "y": (i // 4) * 18,
                "phone_x": (i % 3) * 112,
                "phone_y": (i // 3) * 18,
            }
            for i, (k, c) in enumerate(DECISION_COLORS.items())
        ],
    }


def _latency_chart(since, limit: int = 20_000) -> dict[str, Any]:
    rows = (
        HumanInterrupt.objects.filter(
            status=HumanInterrupt.Status.RESOLVED, responded_at__gte=since
        )
        .filter(decided_by_rule="")  # people's time to decide; rules take none
        .order_by("-responded_at")
        .values_list("reviewer_group__name", "created_at", "responded_at")[:limit]
    )
    waits: dict[str, list[float]] = {}
    for group, created, responded in rows:
        waits.setdefault(group or "none", []).append((responded - created).total_seconds())
    everyone = sorted(w for values in waits.values() for w in values)
    stats = []
    for group, values in sorted(waits.items()):
        values.sort()
        stats.append(
            {
                "group": group,
                "n": len(values),
                "p50": percentile(values, 50),
                "p95": percentile(values, 95),
            }
        )
    if everyone:
        stats.append(
            {
                "group": "all groups",
                "n": len(everyone),
                "p50": percentile(everyone, 50),
                "p95": percentile(everyone, 95),
            }
        )
    biggest = max((s["p95"] for s in stats), default=0.0) or 1.0
    for i, s in enumerate(stats):
        s["y"] = i * 44
        s["p50_width"] = round(BAR_AREA * s["p50"] / biggest, 1)
        s["p95_width"] = round(BAR_AREA * s["p95"] / biggest, 1)
        s["label_x"] = round(s["p95_width"] + 6, 1)
        s["phone_y"] = i * 58
        s["phone_p50_width"] = round(PHONE_BAR_AREA * s["p50"] / biggest, 1)
        s["phone_p95_width"] = round(PHONE_BAR_AREA * s["p95"] / biggest, 1)
        s["p50_label"], s["p95_label"] = human_seconds(s["p50"]), human_seconds(s["p95"])
    return {
        "rows": stats,
        "everyone_p50": percentile(everyone, 50),
        "height": max(len(stats) * 44, 44),
        "phone_height": max(len(stats) * 58, 58),
    }


@login_required
@require_GET
def analytics(request):
    """Decisions by type per group and graph; time to decision p50/p95 per group."""
    # Aggregates over every group's interrupts: for whoever may see all of them anyway,
    # in the inbox (review_all) or in admin (view_humaninterrupt). is_staff alone is not enough.
    if not (user_can_review_all(request.user) or request.user.has_perm("hitl.view_humaninterrupt")):
        raise PermissionDenied(
            "Analytics need the hitl.review_all or hitl.view_humaninterrupt permission."
        )
    try:
        days = min(max(int(request.GET.get("days", 30)), 1), 365)
    except ValueError:
        days = 30
    since = timezone.now() - timedelta(days=days)
    latency = _latency_chart(since)
    return render(
        request,
        "hitl/analytics.html",
        {
            "days": days,
            "day_choices": (1, 7, 30, 90, 365),
            "decisions": _decisions_chart(since),
            "latency": latency,
            "automation": automation_context(since, human_seconds, latency["everyone_p50"]),
            "bar_area": BAR_AREA,
            "phone_width": PHONE_WIDTH,
        },
    )
