"""Operating remote deployments: beat's poll task and resume retries on a real Celery
worker, the write-only key in admin, deployments declared in settings."""

from __future__ import annotations

import pytest
from celery import current_app
from django.core.exceptions import ImproperlyConfigured

from hitl.core.models import HumanInterrupt, RemoteDeployment, RemoteThread, Run
from hitl.core.remote.mirror import deployment_poll, deployments_from_settings
from hitl.settings import _remote_deployments
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deployment(reviewers_group, peer):
    return RemoteDeployment.objects.create(
        name="prod",
        base_url=peer.base_url,
        api_key="key-not-for-pages",
        reviewer_group=reviewers_group,
    )


def _rows(remote_id: str) -> list[HumanInterrupt]:
    link = RemoteThread.objects.filter(remote_thread_id=remote_id).first()
    return list(HumanInterrupt.objects.filter(thread_id=link.thread_id)) if link else []


@pytest.mark.postgres  # another process (a worker, a server) shares the database
@pytest.mark.parametrize("peer", ["langgraph-dev"], indirect=True)
def test_a_worker_polls_and_retries_a_resume_until_the_deployment_is_back(
    peer, deployment, reviewer, client, worker_factory, settings
):
    assert settings.CELERY_BEAT_SCHEDULE["hitl-remote-poll"]["task"] == "hitl.remote.poll"
    worker_factory("remote", HITL_REMOTE_RETRY_SECONDS="0.5")
    remote_id = peer.interrupted_thread("review")

    # Beat's task, run by the worker.
    current_app.send_task("hitl.remote.poll")
    [row] = wait_for(lambda: _rows(remote_id), 30, 0.1, "the remote interrupt to be mirrored")

    peer.stop()
    try:
        client.force_login(reviewer)
        answered = client.post(f"/interrupts/{row.pk}/decide/", {"type": "accept"})
        assert answered.status_code in (200, 302)
        run = Run.objects.get(thread_id=row.thread_id, kind=Run.Kind.RESUME)
        wait_for(
            lambda: Run.objects.filter(pk=run.pk, error__startswith="pending delivery").exists(),
            30,
            0.1,
            "the delivery to fail and wait",
        )
        page = client.get(f"/threads/{row.thread_id}/").content.decode()
        assert "Decision pending delivery." in page
    finally:
        peer.start(fresh=False)

    # The task's own retry delivers it: nobody acts again.
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status=Run.Status.SUCCESS).exists(),
        60,
        0.2,
        "the retried delivery",
    )
    remote = peer.client()
    wait_for(lambda: remote.threads.get(remote_id)["status"] == "idle", 30, 0.1, "the remote run")
    assert remote.threads.get_state(remote_id)["values"]["decision"]["type"] == "accept"


@pytest.mark.parametrize("peer", ["langgraph-dev"], indirect=True)
def test_the_api_key_is_write_only_in_admin(peer, deployment, admin_client):
    listing = admin_client.get("/admin/hitl/remotedeployment/").content.decode()
    change = admin_client.get(f"/admin/hitl/remotedeployment/{deployment.pk}/change/")
    assert "prod" in listing
    assert "key-not-for-pages" not in listing
    assert "key-not-for-pages" not in change.content.decode()
    assert "stored (hidden)" in change.content.decode()

    # Saved with the key field left blank: the stored key stays.
    saved = admin_client.post(
        f"/admin/hitl/remotedeployment/{deployment.pk}/change/",
        {
            "name": "prod",
            "base_url": peer.base_url,
            "api_key": "",
            "graphs": '["review"]',
            "reviewer_group": deployment.reviewer_group_id,
            "enabled": "on",
        },
    )
    assert saved.status_code == 302
    deployment.refresh_from_db()
    assert deployment.api_key == "key-not-for-pages"
    assert deployment.graphs == ["review"]

    refused = admin_client.post(
        f"/admin/hitl/remotedeployment/{deployment.pk}/change/",
        {"name": "prod", "base_url": peer.base_url, "graphs": '{"not": "a list"}'},
    )
    assert refused.status_code == 200 and "A JSON list" in refused.content.decode()


@pytest.mark.parametrize("peer", ["langgraph-dev"], indirect=True)
def test_an_unreachable_deployment_shows_on_its_admin_row_and_healthz(
    peer, admin_client, client, reviewers_group
):
    from tests.conftest import free_port

    away = RemoteDeployment.objects.create(name="away", base_url=f"http://127.0.0.1:{free_port()}")
    assert deployment_poll(away)["failed"] == 1
    away.refresh_from_db()
    assert away.last_error.startswith("unreachable")
    listing = admin_client.get("/admin/hitl/remotedeployment/").content.decode()
    assert "failing: unreachable" in listing
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["remote"]["away"] == "down"  # the why is on the admin row


def test_deployments_declared_in_settings_are_registered(settings, reviewers_group, monkeypatch):
    monkeypatch.setenv("PROD_LANGGRAPH_KEY", "from-the-env")
    settings.HITL_REMOTE_DEPLOYMENTS = _remote_deployments(
        '[{"name": "platform", "url": "https://agents.example.com", '
        '"api_key_env": "PROD_LANGGRAPH_KEY", "graphs": ["agent"], "reviewer_group": "reviewers"}]'
    )
    deployments_from_settings()
    made = RemoteDeployment.objects.get(name="platform")
    assert (made.base_url, made.api_key, made.graphs) == (
        "https://agents.example.com",
        "from-the-env",
        ["agent"],
    )
    assert made.reviewer_group == reviewers_group and made.from_settings

    # An admin edit of a declared deployment is put back at the next poll.
    RemoteDeployment.objects.filter(pk=made.pk).update(base_url="https://elsewhere.example.com")
    deployments_from_settings()
    made.refresh_from_db()
    assert made.base_url == "https://agents.example.com"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[{", "not JSON"),
        ('{"name": "x"}', "JSON list"),
        ('[{"name": "x"}]', "a name and a url"),
        ('[{"name": "x", "url": "https://x", "api_key_env": "HITL_TEST_UNSET_KEY"}]', "not set"),
    ],
)
def test_bad_remote_deployment_settings_fail_loudly(raw, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        _remote_deployments(raw)


def test_a_revoked_key_shows_and_holds_decisions_until_a_new_key_is_set(
    keyed_peer, reviewers_group, reviewer, admin_client, client, manual_runs
):
    from hitl.core.decisions import interrupt_resolve

    deployment = RemoteDeployment.objects.create(
        name="keyed",
        base_url=keyed_peer.base_url,
        api_key="first-key",
        reviewer_group=reviewers_group,
    )
    remote_id = keyed_peer.interrupted_thread("review")
    assert deployment_poll(deployment)["failed"] == 0
    [row] = _rows(remote_id)

    keyed_peer.accept_only("second-key")  # the team rotates its key
    assert deployment_poll(deployment)["failed"] == 1
    deployment.refresh_from_db()
    assert deployment.last_error == "the API key was refused (401)"
    assert client.get("/healthz").json()["remote"]["keyed"] == "down"
    assert (
        "failing: the API key was refused"
        in admin_client.get("/admin/hitl/remotedeployment/").content.decode()
    )

    run = interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept").resume_run
    assert manual_runs(run) == "retry"
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert run.error == "pending delivery to keyed: the API key was refused (401)"

    # The new key, set in admin.
    admin_client.post(
        f"/admin/hitl/remotedeployment/{deployment.pk}/change/",
        {
            "name": "keyed",
            "base_url": keyed_peer.base_url,
            "api_key": "second-key",
            "graphs": "[]",
            "reviewer_group": reviewers_group.pk,
            "enabled": "on",
        },
    )
    assert manual_runs(run) == "delivered"
    remote = keyed_peer.client()
    wait_for(lambda: remote.threads.get(remote_id)["status"] == "idle", 30, 0.1, "the remote run")
    deployment.refresh_from_db()
    assert deployment.api_key == "second-key"
    assert deployment_poll(deployment)["failed"] == 0
    assert RemoteDeployment.objects.get(pk=deployment.pk).last_error == ""


@pytest.mark.postgres  # another process (a worker, a server) shares the database
@pytest.mark.parametrize("peer", ["langgraph-dev"], indirect=True)
def test_the_run_webhook_follows_the_thread_without_a_poll(
    peer, deployment, reviewer, asgi_server, settings, manual_runs
):
    from hitl.core.decisions import interrupt_resolve
    from hitl.core.models import Thread

    settings.HITL_PUBLIC_URL = asgi_server
    remote_id = peer.interrupted_thread("review")
    assert deployment_poll(deployment)["made"] >= 1
    [row] = _rows(remote_id)

    run = interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept").resume_run
    assert manual_runs(run) == "delivered"
    # No poll from here: the deployment calls HITL back when its run ends.
    wait_for(
        lambda: Thread.objects.get(pk=row.thread_id).status == Thread.Status.DONE,
        30,
        0.1,
        "the webhook to mark the thread done",
    )


@pytest.mark.parametrize("peer", ["langgraph-dev"], indirect=True)
def test_a_webhook_with_a_wrong_token_or_body_changes_nothing(peer, deployment, client):
    from hitl.core.remote.webhook import webhook_token

    token = webhook_token(deployment)
    assert client.post("/remote/prod/webhook/wrong/", b"{}", "application/json").status_code == 404
    assert (
        client.post(f"/remote/other/webhook/{token}/", b"{}", "application/json").status_code == 404
    )
    bad = client.post(f"/remote/prod/webhook/{token}/", b"not json", "application/json")
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
    unknown = client.post(
        f"/remote/prod/webhook/{token}/", b'{"thread_id": "not-ours"}', "application/json"
    )
    assert unknown.status_code == 202 and unknown.json()["made"] == 0
    assert client.get(f"/remote/prod/webhook/{token}/").status_code == 405
