"""Per-thread files in an S3 bucket (HITL_FILES_S3_BUCKET): a real S3 server (moto's server
mode), a daphne and a Celery worker, each process with a media folder of its own, so a
file one process wrote reaches another only through the bucket.

The stack and the S3 server are shared by the module; every test gets a flushed database.
The in-process tests run each case on the local folder (the embedded default) and on the
bucket.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.views.debug import SafeExceptionReporterFilter
from PIL import Image

from agents.paths import FileAccessError, FileMissing, NotAFile, PathError
from hitl.core.files.artifacts import artifact_register
from hitl.core.files.storage import StorageThreadFiles
from hitl.core.history import timetravel
from hitl.core.models import ApiToken, Artifact, HumanInterrupt, Thread
from tests.api.conftest import start_daphne
from tests.conftest import ROOT, free_port, start_celery_worker, wait_for
from tests.core.files.bucket_graphs import BUCKET_GRAPHS, NOTES, PHOTO, SEEN, TARGETS
from tests.object_store import SECRET_KEY, S3Server, s3_server  # noqa: F401
from tests.review.conftest import checkpoints

# --- the stack: web and worker, each with its own media folder ---------------------------


@dataclass
class BucketStack:
    base_url: str
    s3: S3Server
    media: dict[str, Path]  # process name -> its MEDIA_ROOT
    log_dir: Path

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.log_dir.glob("*.log"))


@pytest.fixture(scope="module")
def bucket_stack(test_database_url, tmp_path_factory, s3_server) -> Iterator[BucketStack]:  # noqa: F811
    root = tmp_path_factory.mktemp("bucket-stack")
    media = {name: root / f"{name}-media" for name in ("web", "worker")}
    env = s3_server.env(HITL_EXTRA_GRAPHS=BUCKET_GRAPHS, HITL_METRICS_PUBLIC="1")
    worker = start_celery_worker(
        test_database_url,
        root / "celery.log",
        name="bucket",
        concurrency=2,
        MEDIA_ROOT=str(media["worker"]),
        **env,
    )
    try:
        web, base_url = start_daphne(
            test_database_url, root / "daphne.log", MEDIA_ROOT=str(media["web"]), **env
        )
    except BaseException:
        worker.stop()
        raise
    try:
        yield BucketStack(base_url=base_url, s3=s3_server, media=media, log_dir=root)
    finally:
        web.stop()
        worker.stop()


@pytest.fixture
def bucket(settings, media, s3_server) -> S3Server:  # noqa: F811
    """This process keeps its files in the bucket too (its own media folder stays empty)."""
    settings.STORAGES = {**settings.STORAGES, "default": s3_server.storage()}
    return s3_server


@pytest.fixture
def live(bucket_stack, transactional_db, bucket, monkeypatch) -> BucketStack:
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)
    return bucket_stack


class Http:
    """One user's calls to the stack's web process: API token and browser session."""

    def __init__(self, base_url: str, user):
        session = Client()
        session.force_login(user)
        name = django_settings.SESSION_COOKIE_NAME
        self.api = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {ApiToken.issue(user=user, name='s3')[1]}"},
            timeout=30,
        )
        self.browser = httpx.Client(
            base_url=base_url, cookies={name: session.cookies[name].value}, timeout=30
        )

    def decide(self, row: HumanInterrupt, kind: str, args=None) -> None:
        answer = self.api.post(
            f"/api/v1/interrupts/{row.pk}/decision", json={"type": kind, "args": args}
        )
        assert answer.status_code == 200, answer.text


def pending(thread_id, action: str) -> HumanInterrupt | None:
    return HumanInterrupt.objects.filter(
        thread_id=thread_id, status="pending", action=action
    ).first()


def no_thread_files_on_disk(*folders: Path) -> bool:
    return not any((folder / "threads").exists() for folder in folders)


def between(html: str, start: str, end: str) -> str:
    return html[html.index(start) : html.index(end, html.index(start))]


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), "teal").save(out, format="PNG")
    return out.getvalue()


# --- through the real processes ---------------------------------------------------------


@pytest.mark.postgres
def test_the_demo_s_files_go_from_the_worker_to_the_reviewer_through_the_bucket(
    live, requester, reviewer, media
):
    """Written and presented by the worker, shown and served by the web process, mailed
    by the worker, and kept apart per branch after a fork: all from the bucket."""
    asker, decider = Http(live.base_url, requester), Http(live.base_url, reviewer)
    started = asker.api.post("/api/v1/threads", json={"graph": "demo", "input": {}})
    assert started.status_code == 201, started.text
    thread_id = started.json()["thread_id"]
    root = f"threads/{thread_id}"
    question = wait_for(lambda: pending(thread_id, "ask_clarification"), 60, what="question")
    decider.decide(question, "response", "Q2 2025")
    approval = wait_for(lambda: pending(thread_id, "send_email"), 60, what="email approval")

    # The worker wrote, viewed (view_image) and presented the files: they are in the bucket.
    csv_key, png_key = (
        f"{root}/outputs/sales-q2-2025.csv",
        f"{root}/outputs/sales-q2-2025-chart.png",
    )
    assert live.s3.keys(root) == sorted([csv_key, png_key])
    csv_bytes, png = live.s3.read(csv_key), live.s3.read(png_key)
    assert csv_bytes.startswith(b"month,region") and png.startswith(b"\x89PNG")
    artifacts = {a.path.rsplit("/", 1)[-1]: a for a in Artifact.objects.filter(thread_id=thread_id)}
    assert artifacts["sales-q2-2025-chart.png"].sha256 == hashlib.sha256(png).hexdigest()
    assert artifacts["sales-q2-2025.csv"].size == len(csv_bytes)

    # The web process serves them: the API download, the page's download and preview.
    download = asker.api.get(
        f"/api/v1/threads/{thread_id}/files",
        params={"path": "/mnt/user-data/outputs/sales-q2-2025.csv"},
    )
    assert download.status_code == 200 and download.content == csv_bytes
    assert download.headers["content-disposition"].startswith("attachment;")
    assert download.headers["content-length"] == str(len(csv_bytes))
    image = asker.browser.get(
        f"/threads/{thread_id}/files/{artifacts['sales-q2-2025-chart.png'].pk}/?inline=1"
    )
    assert image.status_code == 200 and image.content == png
    assert image.headers["content-type"] == "image/png"
    page = asker.browser.get(f"/threads/{thread_id}/").text
    first_row = next(csv.DictReader(io.StringIO(csv_bytes.decode())))
    files = between(page, 'id="section-artifacts"', "</section>")
    assert "The file is no longer in storage" not in files
    assert f"<td>{first_row['month']}</td>" in files and f"<td>{first_row['revenue']}</td>" in files

    # Accepted: the worker reads the attachments back from the bucket and mails them.
    decider.decide(approval, "accept")
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", 60, what="thread done")
    (outbox,) = [k for k in live.s3.keys(f"{root}/workspace/") if k.endswith(".eml")]
    mail = live.s3.read(outbox).decode()
    assert "To: finance-team@example.com" in mail and 'filename="sales-q2-2025-chart.png"' in mail

    # Time travel: a fork from the quarter question writes its own files; the page shows
    # the original branch's apart, previewed from the bucket.
    (quarter,) = [
        cp
        for cp in checkpoints(Thread.objects.get(pk=thread_id))
        if cp["next"] == ["tools"] and cp["step"] == 2
    ]
    timetravel.thread_fork(
        thread=Thread.objects.get(pk=thread_id),
        user=requester,
        checkpoint_id=quarter["checkpoint_id"],
    )
    again = wait_for(lambda: pending(thread_id, "ask_clarification"), 60, what="question again")
    decider.decide(again, "response", "Q4 2025")
    wait_for(lambda: pending(thread_id, "send_email"), 60, what="the fork's approval")
    assert f"{root}/outputs/sales-q4-2025.csv" in live.s3.keys(root)
    page = asker.browser.get(f"/threads/{thread_id}/").text
    current = between(page, 'id="section-artifacts"', 'id="other-branch-files"')
    other = between(page, 'id="other-branch-files"', "</details>")
    assert "sales-q4-2025.csv" in current and "sales-q2-2025.csv" not in current
    assert "sales-q2-2025.csv" in other and f"<td>{first_row['revenue']}</td>" in other
    old_csv = asker.browser.get(f"/threads/{thread_id}/files/{artifacts['sales-q2-2025.csv'].pk}/")
    assert old_csv.status_code == 200 and old_csv.content == csv_bytes

    # Only the bucket held them: no process's media folder has a thread file.
    assert no_thread_files_on_disk(*live.media.values(), media)
    # The secret key is handed to the storage and shown nowhere.
    shown = [
        page,
        asker.api.get(f"/api/v1/threads/{thread_id}").text,
        httpx.get(f"{live.base_url}/healthz").text,
        httpx.get(f"{live.base_url}/metrics").text,
        live.logs(),
    ]
    assert httpx.get(f"{live.base_url}/healthz").json()["status"] == "ok"
    assert not [text[:200] for text in shown if SECRET_KEY in text]


@pytest.mark.postgres
def test_the_worker_reads_the_requester_s_uploads_from_the_bucket(live, requester, reviewer, media):
    """Uploaded through the web process; viewed (view_image) and read by the worker."""
    asker, decider = Http(live.base_url, requester), Http(live.base_url, reviewer)
    started = asker.api.post(
        "/api/v1/threads", json={"graph": "upload_reader", "input": {"request": "look"}}
    )
    assert started.status_code == 201, started.text
    thread_id = started.json()["thread_id"]
    question = wait_for(lambda: pending(thread_id, "ask_clarification"), 60, what="question")
    photo, notes = png_bytes(), b"Q3 looked fine.\n"
    for name, data in (("photo.png", photo), ("notes.txt", notes)):
        stored = asker.api.post(f"/api/v1/threads/{thread_id}/files", files={"file": (name, data)})
        assert stored.status_code == 201, stored.text
    root = f"threads/{thread_id}"
    assert live.s3.read(f"{root}/uploads/photo.png") == photo

    decider.decide(question, "response", "go")
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", 60, what="thread done")
    seen = live.s3.read(f"{root}/outputs/seen.txt").decode()
    assert f"view_image success: Loaded {PHOTO} (image/png, {len(photo)} bytes)" in seen
    assert "notes: Q3 looked fine." in seen
    (artifact,) = Artifact.objects.filter(thread_id=thread_id)
    assert (artifact.path, artifact.size) == (SEEN, len(seen.encode()))
    served = asker.api.get(f"/api/v1/threads/{thread_id}/files", params={"path": NOTES})
    assert served.content == notes
    assert no_thread_files_on_disk(*live.media.values(), media)


# --- in this process: the local folder and the bucket alike -----------------------------


@pytest.fixture(params=["local", "bucket"])
def backend(request, settings, media, s3_server) -> str:  # noqa: F811
    if request.param == "bucket":
        settings.STORAGES = {**settings.STORAGES, "default": s3_server.storage()}
    return request.param


@pytest.fixture
def thread(db, requester, reviewers_group) -> Thread:
    return Thread.objects.create(
        graph="demo", title="files", requester=requester, reviewer_group=reviewers_group
    )


def test_the_store_behaves_the_same_on_disk_and_in_a_bucket(backend, thread, media, s3_server):  # noqa: F811
    store = StorageThreadFiles(thread.pk)
    assert store.listdir("/mnt/user-data/outputs") == ([], [])
    store.write_bytes("/mnt/user-data/outputs/report/summary.txt", b"first")
    store.write_bytes("/mnt/user-data/outputs/report/summary.txt", b"second, longer")
    assert store.read_bytes("/mnt/user-data/outputs/report/summary.txt") == b"second, longer"
    assert store.sha256("/mnt/user-data/outputs/report/summary.txt") == (
        hashlib.sha256(b"second, longer").hexdigest(),
        14,
    )
    assert store.listdir("/mnt/user-data/outputs") == (["report"], [])
    assert store.listdir("/mnt/user-data/outputs/report") == ([], ["summary.txt"])
    assert store.is_dir("/mnt/user-data/outputs/report")
    assert store.is_file("/mnt/user-data/outputs/report/summary.txt")
    assert not store.exists("/mnt/user-data/outputs/report/other.txt")
    with pytest.raises(NotAFile, match="is a directory"):
        store.read_bytes("/mnt/user-data/outputs/report")
    with pytest.raises(NotAFile, match="is a directory"):
        store.write_bytes("/mnt/user-data/outputs/report", b"x")
    with pytest.raises(NotAFile, match="is a file"):
        store.write_bytes("/mnt/user-data/outputs/report/summary.txt/deeper.txt", b"x")
    with pytest.raises(FileMissing):
        store.read_bytes("/mnt/user-data/outputs/missing.txt")
    with pytest.raises(FileMissing):
        store.require_file("/mnt/user-data/uploads")
    with pytest.raises(PathError):
        store.read_bytes("/mnt/user-data/outputs/../../threads/other/outputs/x")
    with pytest.raises(FileAccessError, match="the limit here is 4 bytes"):
        store.read_bytes("/mnt/user-data/outputs/report/summary.txt", max_bytes=4)
    keys = s3_server.keys(f"threads/{thread.pk}/")
    on_disk = (media / "threads" / str(thread.pk) / "outputs/report/summary.txt").exists()
    if backend == "bucket":
        assert keys == [f"threads/{thread.pk}/outputs/report/summary.txt"] and not on_disk
    else:
        assert keys == [] and on_disk


@pytest.fixture
def other_thread(db, requester, reviewers_group) -> Thread:
    """Another requester's thread holding a secret file, next to `thread`."""
    other = Thread.objects.create(graph="demo", title="other", reviewer_group=reviewers_group)
    StorageThreadFiles(other.pk).write_bytes("/mnt/user-data/uploads/secret.txt", b"TOP-SECRET")
    return other


BAD_PATHS = [
    "/mnt/user-data/uploads/../../../etc/passwd",
    "/mnt/user-data/uploads/..%2f..%2f{other}%2fuploads%2fsecret.txt",
    "/mnt/user-data/../../threads/{other}/uploads/secret.txt",
    "/mnt/user-data/uploads/%2e%2e/%2e%2e/{other}/uploads/secret.txt",
    "threads/{other}/uploads/secret.txt",
    "/threads/{other}/uploads/secret.txt",
    "{other}/uploads/secret.txt",
    "/etc/passwd",
    "/mnt/user-data/uploads\\..\\..\\{other}\\uploads\\secret.txt",
    "/mnt/user-data/uploads/a\x00b",
    "/mnt/user-data/uploads/\u202esecret.txt",
    "/mnt/user-data/uploads/" + "a" * 300,
    "/mnt/user-data/uploads/" + "a/" * 600,
    "/mnt/user-data/uploads",
    "/mnt/user-data/",
    "/mnt/user-data/secrets/x",
    "",
    " ",
    "/",
    "/mnt/user-data/uploads/*",
    "/mnt/user-data/uploads/?versionId=1",
]


def test_bad_download_paths_are_refused_without_reaching_another_thread(
    backend, thread, other_thread, api_for, requester
):
    api = api_for(requester)
    for raw in BAD_PATHS:
        path = raw.format(other=other_thread.pk)
        answer = api.client.get(f"/api/v1/threads/{thread.pk}/files", {"path": path}, **api.headers)
        assert answer.status_code in (400, 404), (path, answer.status_code)
        body = b"".join(answer.streaming_content) if answer.streaming else answer.content
        assert b"TOP-SECRET" not in body, path
    # The other thread's own file, asked for through its id by someone who may not see it.
    denied = api.client.get(
        f"/api/v1/threads/{other_thread.pk}/files",
        {"path": "/mnt/user-data/uploads/secret.txt"},
        **api.headers,
    )
    assert denied.status_code == 404


BAD_NAMES = [
    "../../{other}/uploads/secret.txt",
    "..\\..\\evil.txt",
    "/etc/passwd",
    "a/b/c.txt",
    "threads/{other}/uploads/x.txt",
    "%2e%2e%2fx.txt",
    "ü-ß-文.txt",
    "x" * 400 + ".txt",
    "CON",
    "name with spaces (1).csv",
]


def test_bad_upload_names_land_safely_in_this_thread_s_uploads(
    backend,
    thread,
    other_thread,
    api_for,
    requester,
    media,
    s3_server,  # noqa: F811
):
    api = api_for(requester)
    for raw in BAD_NAMES:
        name = raw.format(other=other_thread.pk)
        answer = api.client.post(
            f"/api/v1/threads/{thread.pk}/files",
            {"file": SimpleUploadedFile(name, b"fuzz")},
            **api.headers,
        )
        assert answer.status_code == 201, (name, answer.content)
        stored = answer.json()["path"]
        assert stored.startswith("/mnt/user-data/uploads/") and stored.count("/") == 4, stored
    assert StorageThreadFiles(other_thread.pk).listdir("/mnt/user-data/uploads") == (
        [],
        ["secret.txt"],
    )
    assert (
        StorageThreadFiles(other_thread.pk).read_bytes("/mnt/user-data/uploads/secret.txt")
        == b"TOP-SECRET"
    )
    names = StorageThreadFiles(thread.pk).listdir("/mnt/user-data/uploads")[1]
    assert len(names) == len(BAD_NAMES) and all(len(n.encode()) <= 255 for n in names)
    assert written(backend, media, s3_server, thread, other_thread) == sorted(
        [f"threads/{other_thread.pk}/uploads/secret.txt"]
        + [f"threads/{thread.pk}/uploads/{n}" for n in names]
    )


def written(backend: str, media: Path, s3: S3Server, *threads: Thread) -> list[str]:
    """Every file stored for these threads, and anything stored outside threads/ at all."""
    if backend == "bucket":
        keys = s3.keys()
    else:
        keys = [p.relative_to(media).as_posix() for p in media.rglob("*") if p.is_file()]
    mine = tuple(f"threads/{t.pk}/" for t in threads)
    return sorted(k for k in keys if k.startswith(mine) or not k.startswith("threads/"))


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_artifact_pages_refuse_bad_ids_and_say_when_the_file_is_gone(
    backend, thread, other_thread, requester
):
    store = StorageThreadFiles(thread.pk)
    store.write_bytes("/mnt/user-data/outputs/kept.csv", b"a,b\n1,2\n")
    kept = artifact_register(thread=thread, path="/mnt/user-data/outputs/kept.csv")
    store.write_bytes("/mnt/user-data/outputs/gone.csv", b"x")
    gone = artifact_register(thread=thread, path="/mnt/user-data/outputs/gone.csv")
    store.storage.delete(store.name("/mnt/user-data/outputs/gone.csv"))
    # A row whose path was tampered with is refused by the store, not followed.
    forged = Artifact.objects.create(
        thread=thread, path=f"/mnt/user-data/../../threads/{other_thread.pk}/uploads/secret.txt"
    )
    client = signed_in(requester)
    url = f"/threads/{thread.pk}/files"
    served = client.get(f"{url}/{kept.pk}/")
    assert served.status_code == 200 and b"".join(served.streaming_content) == b"a,b\n1,2\n"
    assert client.get(f"{url}/{gone.pk}/").status_code == 410
    forged_answer = client.get(f"{url}/{forged.pk}/")
    assert forged_answer.status_code == 410 and b"TOP-SECRET" not in forged_answer.content
    assert client.get(f"/threads/{other_thread.pk}/files/{kept.pk}/").status_code == 404
    for bad in ("not-a-uuid", "..%2f..%2fsecret.txt", "%00", "0" * 300):
        assert client.get(f"{url}/{bad}/").status_code == 404, bad


def test_with_the_bucket_switched_off_a_worker_s_files_are_not_found(
    bucket, thread, requester, settings, media
):
    """The switch is what carries the bytes: the same object, read with the setting off,
    is not there (the web process reads its own folder)."""
    key = f"threads/{thread.pk}/outputs/from-worker.csv"
    bucket.put(key, b"made,elsewhere\n")
    artifact = artifact_register(thread=thread, path="/mnt/user-data/outputs/from-worker.csv")
    page = f"/threads/{thread.pk}/files/{artifact.pk}/"
    served = signed_in(requester).get(page)
    assert b"".join(served.streaming_content) == b"made,elsewhere\n"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    assert signed_in(requester).get(page).status_code == 410
    assert not (media / "threads").exists()


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        (
            {"HITL_FILES_S3_BUCKET": "Not_A_Bucket"},
            "HITL_FILES_S3_BUCKET must be an S3 bucket name",
        ),
        (
            {"HITL_FILES_S3_ENDPOINT_URL": "minio:9000"},
            "HITL_FILES_S3_ENDPOINT_URL must be an http(s) URL",
        ),
        ({"HITL_FILES_S3_ADDRESSING_STYLE": "sideways"}, "must be path, virtual or auto"),
        ({"HITL_FILES_S3_ACCESS_KEY_ID": ""}, "Set both HITL_FILES_S3_ACCESS_KEY_ID and"),
    ],
    ids=["bucket", "endpoint", "addressing", "one-key"],
)
def test_a_wrong_bucket_setting_stops_startup_naming_it(s3_server, setting, says):  # noqa: F811
    started = subprocess.run(
        [sys.executable, "-c", "import hitl.settings"],
        env={**os.environ, **s3_server.env(**setting)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0 and says in started.stderr, started.stderr[-2000:]
    assert SECRET_KEY not in started.stderr


def test_a_bucket_that_does_not_answer_is_a_503_and_the_page_still_shows(
    bucket, thread, requester, settings, api_for
):
    store = StorageThreadFiles(thread.pk)
    store.write_bytes("/mnt/user-data/outputs/table.csv", b"a,b\n1,2\n")
    artifact = artifact_register(thread=thread, path="/mnt/user-data/outputs/table.csv")
    entry = bucket.storage()
    dead = {**entry["OPTIONS"], "endpoint_url": f"http://127.0.0.1:{free_port()}"}
    settings.STORAGES = {**settings.STORAGES, "default": {**entry, "OPTIONS": dead}}
    api, browser = api_for(requester), signed_in(requester)
    files = f"/api/v1/threads/{thread.pk}/files"
    download = api.client.get(files, {"path": "/mnt/user-data/outputs/table.csv"}, **api.headers)
    assert download.status_code == 503 and "did not answer" in download.json()["detail"]
    upload = api.client.post(files, {"file": SimpleUploadedFile("new.txt", b"x")}, **api.headers)
    assert upload.status_code == 503 and "did not answer" in upload.json()["detail"]
    assert browser.get(f"/threads/{thread.pk}/files/{artifact.pk}/").status_code == 503
    page = browser.get(f"/threads/{thread.pk}/")
    assert page.status_code == 200
    assert b"The file store did not answer; reload to try again." in page.content


def test_django_s_error_reports_hide_the_bucket_s_keys(bucket):
    shown = SafeExceptionReporterFilter().get_safe_settings()
    assert shown["STORAGES"]["default"]["OPTIONS"]["bucket_name"] == bucket.bucket
    assert SECRET_KEY not in repr(shown)
