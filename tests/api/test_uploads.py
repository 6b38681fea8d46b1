"""Upload names: empty, dot and overlong names get a clear 400 or a safe name, never a 500
or a bare "Field required". In-process through Django's real multipart parser; runs on
SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest

from hitl.core.files.storage import upload_name


@pytest.fixture
def thread(api_for, requester, manual_runs, media):
    started = api_for(requester).post("/api/v1/threads", {"graph": "approval", "input": {}})
    assert started.status_code == 201, started.content
    return started.json()["thread_id"]


BOUNDARY = "hitl-test-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def multipart(parts: list[tuple[str, str | None, bytes]]) -> bytes:
    """A multipart body written by hand: (field, filename or None for text, content)."""
    out = b""
    for field, filename, content in parts:
        disposition = f'form-data; name="{field}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n".encode()
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + content + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def a_file(name: str, data: bytes = b"x") -> list:
    return [("file", name, data)]


def upload(api, thread_id: str, data: list | bytes, content_type: str = MULTIPART):
    body = data if isinstance(data, bytes) else multipart(data)
    return api.client.post(
        f"/api/v1/threads/{thread_id}/files", body, content_type=content_type, **api.headers
    )


def uploads_dir(media, thread_id):
    return media / "threads" / thread_id / "uploads"


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_a_file_without_a_usable_name_is_a_clear_400(api_for, requester, thread, media, name):
    response = upload(api_for(requester), thread, a_file(name))
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert 'field "file"' in detail and "Field required" not in detail
    assert not uploads_dir(media, thread).exists()


@pytest.mark.parametrize("name", ["...", ". .", "../...", "a/..", "..\\..."])
def test_a_name_that_sanitizes_to_nothing_is_a_clear_400(api_for, requester, thread, media, name):
    response = upload(api_for(requester), thread, a_file(name))
    assert response.status_code == 400, response.content
    assert (
        "no usable characters" in response.json()["detail"]
        or 'field "file"' in (response.json()["detail"])
    )
    assert not uploads_dir(media, thread).exists()


@pytest.mark.parametrize(
    "body",
    [
        [("file", None, b"just text, no filename")],  # a text field named "file"
        [("upload", "a.txt", b"x")],  # the wrong field name
        [],
    ],
)
def test_a_missing_file_part_says_what_to_send(api_for, requester, thread, media, body):
    response = upload(api_for(requester), thread, body)
    assert response.status_code == 400, response.content
    assert 'field "file"' in response.json()["detail"]


def test_a_json_body_instead_of_multipart_says_what_to_send(api_for, requester, thread):
    response = upload(api_for(requester), thread, b'{"file": "x"}', "application/json")
    assert response.status_code == 400, response.content
    assert "multipart/form-data" in response.json()["detail"]


@pytest.mark.parametrize(
    ("name", "stored_suffix"),
    [("a" * 300 + ".csv", ".csv"), ("文" * 200 + ".txt", ".txt"), ("x." + "b" * 300, "")],
)
def test_an_overlong_name_is_shortened_to_fit_the_file_system(
    api_for, requester, thread, media, name, stored_suffix
):
    api = api_for(requester)
    first = upload(api, thread, a_file(name, b"1"))
    again = upload(api, thread, a_file(name, b"2"))
    assert (first.status_code, again.status_code) == (201, 201), first.content
    names = sorted(p.name for p in uploads_dir(media, thread).iterdir())
    assert len(names) == 2
    assert all(len(n.encode()) <= 255 for n in names)
    assert first.json()["path"].endswith(stored_suffix)
    assert again.json()["name"] != first.json()["name"]  # never overwritten


def test_upload_names_keep_whole_characters():
    assert upload_name("é" * 100 + ".md").encode().decode() == "é" * 60 + ".md"
    assert upload_name(". .hidden") == "hidden"
    with pytest.raises(Exception, match="no usable characters"):
        upload_name(" . ")
