"""The agents inside HITL: the demo on a real Celery worker, files in media storage,
uploads, downloads and artifacts."""

from __future__ import annotations

import hashlib
import os

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agents.graphs.demo import QUARTERS
from agents.paths import PathError
from hitl.core.files.artifacts import artifact_register, run_outputs_record
from hitl.core.files.storage import StorageThreadFiles, upload_name
from hitl.core.models import Artifact, HumanInterrupt, Run, Thread
from tests.conftest import wait_for

pytestmark = pytest.mark.postgres


def pending_row(thread_id, action: str) -> HumanInterrupt | None:
    return HumanInterrupt.objects.filter(
        thread_id=thread_id, status="pending", action=action
    ).first()


def test_the_demo_runs_end_to_end_on_a_celery_worker(
    worker_factory, transactional_db, media, api_for, requester, reviewer
):
    worker_factory("w1", MEDIA_ROOT=str(media))
    requester_api, reviewer_api = api_for(requester), api_for(reviewer)
    started = requester_api.post(
        "/api/v1/threads",
        {"graph": "demo", "input": {"request": "Prepare and send the sales report"}},
    )
    assert started.status_code == 201, started.content
    thread_id = started.json()["thread_id"]

    question = wait_for(
        lambda: pending_row(thread_id, "ask_clarification"), 60, what="clarification"
    )
    assert question.raw_value["clarification"]["options"] == QUARTERS
    assert question.allowed_types == ["response", "ignore"]
    refused = reviewer_api.decide(question, "accept")
    assert refused.status_code == 400 and "does not allow 'accept'" in refused.json()["detail"]
    assert reviewer_api.decide(question, "response", "Q2 2025").status_code == 200

    approval = wait_for(lambda: pending_row(thread_id, "send_email"), 60, what="email approval")
    root = media / "threads" / thread_id
    csv_file, png_file = (
        root / "outputs/sales-q2-2025.csv",
        root / "outputs/sales-q2-2025-chart.png",
    )
    assert csv_file.read_bytes().startswith(b"month,region")
    assert png_file.read_bytes().startswith(b"\x89PNG")
    # Presented files are artifacts while the approval waits.
    artifacts = {a.path: a for a in Artifact.objects.filter(thread_id=thread_id)}
    assert set(artifacts) == {
        "/mnt/user-data/outputs/sales-q2-2025.csv",
        "/mnt/user-data/outputs/sales-q2-2025-chart.png",
    }
    png = artifacts["/mnt/user-data/outputs/sales-q2-2025-chart.png"]
    assert (png.mime, png.size) == ("image/png", png_file.stat().st_size)
    assert png.sha256 == hashlib.sha256(png_file.read_bytes()).hexdigest()

    args = dict(approval.args)
    wrong_type = reviewer_api.decide(
        approval, "edit", {"action": "send_email", "args": {**args, "to": 42}}
    )
    assert (
        wrong_type.status_code == 400
        and "42 is not of type 'string'" in wrong_type.json()["detail"]
    )
    not_editable = reviewer_api.decide(
        approval, "edit", {"action": "send_email", "args": {**args, "body": "hi"}}
    )
    assert not_editable.status_code == 400 and "body" in not_editable.json()["detail"]
    # Only the changed fields: the others keep their proposed values.
    edited = {"to": "cfo@example.com", "subject": "Q2 figures"}
    assert (
        reviewer_api.decide(approval, "edit", {"action": "send_email", "args": edited}).status_code
        == 200
    )

    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", 60, what="thread done")
    final = Run.objects.filter(thread_id=thread_id).order_by("-created_at").first().final_result
    assert final["email_sent"] is True
    assert (final["recipient"], final["subject"], final["quarter"]) == (
        "cfo@example.com",
        "Q2 figures",
        "Q2 2025",
    )
    assert "To: cfo@example.com" in (root / "workspace/outbox/q2-figures.eml").read_text()
    detail = requester_api.get(f"/api/v1/threads/{thread_id}").json()
    assert detail["latest_run"]["final_result"] == final
    assert [a["name"] for a in detail["artifacts"]] == [
        "sales-q2-2025.csv",
        "sales-q2-2025-chart.png",
    ]
    # Nothing was written outside the thread's directory.
    assert sorted(p.name for p in (media / "threads").iterdir()) == [thread_id]


# --- uploads and downloads ---------------------------------------------------------


@pytest.fixture
def demo_thread(manual_runs, api_for, requester, media):
    thread_id = (
        api_for(requester)
        .post("/api/v1/threads", {"graph": "demo", "input": {}})
        .json()["thread_id"]
    )
    manual_runs(Run.objects.get(thread_id=thread_id))  # pauses at the clarification
    return Thread.objects.get(pk=thread_id)


def upload(api, thread, name: str, data: bytes):
    return api.client.post(
        f"/api/v1/threads/{thread.pk}/files",
        {"file": SimpleUploadedFile(name, data)},
        **api.headers,
    )


def test_requester_uploads_land_in_the_thread_uploads(api_for, requester, demo_thread, media):
    api = api_for(requester)
    first = upload(api, demo_thread, "figures.csv", b"a,b\n")
    assert first.status_code == 201, first.content
    assert first.json()["path"] == "/mnt/user-data/uploads/figures.csv"
    assert first.json()["sha256"] == hashlib.sha256(b"a,b\n").hexdigest()
    again = upload(api, demo_thread, "figures.csv", b"c,d\n")
    assert again.json()["path"] == "/mnt/user-data/uploads/figures-2.csv"  # never overwritten
    sneaky = upload(api, demo_thread, "../../../etc/evil.txt", b"x")
    assert sneaky.json()["path"] == "/mnt/user-data/uploads/evil.txt"
    uploads = media / "threads" / str(demo_thread.pk) / "uploads"
    assert sorted(p.name for p in uploads.iterdir()) == ["evil.txt", "figures-2.csv", "figures.csv"]
    # The agent's file store sees them.
    store = StorageThreadFiles(demo_thread.pk)
    assert store.read_bytes("/mnt/user-data/uploads/figures.csv") == b"a,b\n"


def test_uploads_are_capped_and_limited_to_the_requester(
    api_for, requester, reviewer, outsider, demo_thread, media, settings
):
    settings.HITL_MAX_UPLOAD_BYTES = 10
    too_big = upload(api_for(requester), demo_thread, "big.bin", b"x" * 11)
    assert too_big.status_code == 413 and "at most 10 bytes" in too_big.json()["detail"]
    assert upload(api_for(outsider), demo_thread, "a.txt", b"x").status_code == 404
    assert upload(api_for(reviewer), demo_thread, "a.txt", b"x").status_code == 403
    nameless = upload(api_for(requester), demo_thread, "...", b"x")
    assert nameless.status_code == 400
    assert not (media / "threads" / str(demo_thread.pk) / "uploads").exists()


def test_upload_names_are_made_safe():
    assert upload_name("C:\\Users\\me\\report (1).csv") == "report (1).csv"
    assert upload_name("..hidden") == "hidden"
    assert upload_name("a<b>|c.txt") == "a_b__c.txt"


def test_thread_files_download_as_attachments(api_for, requester, outsider, demo_thread, media):
    api = api_for(requester)
    upload(api, demo_thread, "page.html", b"<script>alert(1)</script>")
    url = f"/api/v1/threads/{demo_thread.pk}/files"

    def get(client, path):
        return client.client.get(url, {"path": path}, **client.headers)

    response = get(api, "/mnt/user-data/uploads/page.html")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content) == b"<script>alert(1)</script>"
    assert get(api, "/mnt/user-data/uploads/../../x").status_code == 400
    assert get(api, "/mnt/user-data/uploads/missing.txt").status_code == 404
    assert get(api_for(outsider), "/mnt/user-data/uploads/page.html").status_code == 404


# --- storage store and artifacts -----------------------------------------------------


def test_the_storage_store_refuses_symlinks_out_of_the_thread(demo_thread, media, tmp_path):
    store = StorageThreadFiles(demo_thread.pk)
    store.write_bytes("/mnt/user-data/outputs/ok.txt", b"fine")
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret")
    os.symlink(outside, media / "threads" / str(demo_thread.pk) / "outputs" / "link.txt")
    with pytest.raises(PathError, match="outside"):
        store.read_bytes("/mnt/user-data/outputs/link.txt")
    with pytest.raises(PathError, match="outside"):
        store.write_bytes("/mnt/user-data/outputs/link.txt", b"overwrite")
    assert outside.read_text() == "host secret"
    assert store.listdir("/mnt/user-data/outputs") == ([], ["link.txt", "ok.txt"])


def test_artifacts_are_registered_idempotently(demo_thread, media):
    store = StorageThreadFiles(demo_thread.pk)
    store.write_bytes("/mnt/user-data/outputs/r.csv", b"1,2\n")
    first = artifact_register(thread=demo_thread, path="/mnt/user-data/outputs/r.csv")
    again = artifact_register(thread=demo_thread, path="/mnt/user-data/outputs/r.csv")
    assert first.pk == again.pk and Artifact.objects.filter(thread=demo_thread).count() == 1
    assert (again.size, again.mime) == (4, "text/csv")
    store.write_bytes("/mnt/user-data/outputs/r.csv", b"1,2\n3,4\n")  # the agent rewrote it
    assert artifact_register(thread=demo_thread, path="/mnt/user-data/outputs/r.csv").size == 8
    with pytest.raises(PathError):
        artifact_register(thread=demo_thread, path="/mnt/user-data/outputs/../uploads/x")


def test_run_outputs_skip_vanished_files_and_store_the_final_result(demo_thread, media):
    run = demo_thread.runs.get()
    StorageThreadFiles(demo_thread.pk).write_bytes("/mnt/user-data/outputs/a.txt", b"a")
    recorded = run_outputs_record(
        run_id=run.pk,
        values={
            "artifacts": ["/mnt/user-data/outputs/a.txt", "/mnt/user-data/outputs/gone.txt"],
            "final_result": {"summary": "ok"},
        },
    )
    assert [a.path for a in recorded] == ["/mnt/user-data/outputs/a.txt"]
    run.refresh_from_db()
    assert run.final_result == {"summary": "ok"}
