"""Virtual path mapping and the local per-thread file store, without Django."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agents.paths import (
    FILES_KEY,
    FileAccessError,
    FileMissing,
    LocalThreadFiles,
    NotAFile,
    PathError,
    files_from_config,
    parse_virtual,
)
from agents.state import merge_dicts, merge_unique


@pytest.fixture
def files(tmp_path):
    return LocalThreadFiles(tmp_path / "media", "thread-a")


def test_virtual_paths_map_to_the_thread_directory(files, tmp_path):
    vp = parse_virtual("/mnt/user-data/outputs/reports/q3.csv")
    assert (vp.area, vp.parts, vp.key) == (
        "outputs",
        ("reports", "q3.csv"),
        "outputs/reports/q3.csv",
    )
    assert vp.virtual == "/mnt/user-data/outputs/reports/q3.csv"
    files.write_bytes(vp.virtual, b"a,b\n")
    assert (tmp_path / "media/threads/thread-a/outputs/reports/q3.csv").read_bytes() == b"a,b\n"


def test_double_slashes_are_tolerated_and_the_area_root_is_a_directory():
    assert parse_virtual("/mnt//user-data/uploads//x.txt").virtual == "/mnt/user-data/uploads/x.txt"
    root = parse_virtual("/mnt/user-data/workspace/")
    assert root.parts == () and root.key == "workspace"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("outputs/report.csv", "Relative paths are not allowed"),
        ("mnt/user-data/outputs/report.csv", "Relative paths are not allowed"),
        ("/mnt/user-data/outputs/../../etc/passwd", "'..' are not allowed"),
        ("/mnt/user-data/outputs/./a.csv", "'..' are not allowed"),
        ("/etc/passwd", "outside this thread's files"),
        ("/mnt/user-data/secrets/a.txt", "Unknown area"),
        ("/mnt/user-data", "Unknown area"),
        ("/mnt/user-data/outputs\\a.csv", "forward slashes"),
        ("/mnt/user-data/outputs/a\x00.csv", "control characters"),
        ("", "non-empty string"),
        (None, "non-empty string"),
    ],
)
def test_bad_paths_are_refused_with_a_hint(path, message):
    with pytest.raises(PathError, match=message) as info:
        parse_virtual(path)
    assert "/mnt/user-data" in str(info.value) or "characters" in str(info.value)


def test_another_threads_files_cannot_be_addressed(files, tmp_path):
    other = LocalThreadFiles(tmp_path / "media", "thread-b")
    other.write_bytes("/mnt/user-data/outputs/secret.txt", b"theirs")
    host_path = tmp_path / "media/threads/thread-b/outputs/secret.txt"
    for path in (
        str(host_path),
        "/mnt/user-data/../threads/thread-b/outputs/secret.txt",
        "/threads/thread-b/outputs/secret.txt",
        "/mnt/user-data/threads/thread-b/outputs/secret.txt",
    ):
        with pytest.raises(PathError):
            files.read_bytes(path)
    assert not files.exists("/mnt/user-data/outputs/secret.txt")


def test_a_symlink_out_of_the_thread_root_is_neither_read_nor_written(files, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    outputs = tmp_path / "media/threads/thread-a/outputs"
    outputs.mkdir(parents=True)
    os.symlink(outside / "secret.txt", outputs / "link.txt")
    os.symlink(outside, outputs / "linkdir")

    with pytest.raises(PathError, match="leads outside"):
        files.read_bytes("/mnt/user-data/outputs/link.txt")
    with pytest.raises(PathError, match="leads outside"):
        files.write_bytes("/mnt/user-data/outputs/link.txt", b"overwrite")
    with pytest.raises(PathError, match="leads outside"):
        files.write_bytes("/mnt/user-data/outputs/linkdir/new.txt", b"escape")
    assert (outside / "secret.txt").read_text() == "host secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_symlink_into_another_thread_is_refused(files, tmp_path):
    other = LocalThreadFiles(tmp_path / "media", "thread-b")
    other.write_bytes("/mnt/user-data/outputs/secret.txt", b"theirs")
    files.write_bytes("/mnt/user-data/workspace/placeholder", b"")
    os.symlink(
        tmp_path / "media/threads/thread-b/outputs/secret.txt",
        tmp_path / "media/threads/thread-a/workspace/theirs.txt",
    )
    with pytest.raises(PathError):
        files.read_bytes("/mnt/user-data/workspace/theirs.txt")


def test_missing_files_and_directories_are_told_apart(files):
    with pytest.raises(FileMissing, match="does not exist"):
        files.read_bytes("/mnt/user-data/uploads/nope.txt")
    files.write_bytes("/mnt/user-data/outputs/sub/a.txt", b"x")
    with pytest.raises(NotAFile, match="is a directory"):
        files.read_bytes("/mnt/user-data/outputs/sub")
    with pytest.raises(NotAFile, match="directory"):
        files.write_bytes("/mnt/user-data/outputs/sub", b"x")
    with pytest.raises(NotAFile):
        files.write_bytes("/mnt/user-data/outputs", b"x")


def test_store_operations(files):
    assert files.listdir("/mnt/user-data/outputs") == ([], [])  # untouched area: empty
    files.write_bytes("/mnt/user-data/outputs/b.txt", b"12345")
    files.write_bytes("/mnt/user-data/outputs/a/c.txt", b"1")
    files.write_bytes("/mnt/user-data/outputs/b.txt", b"123")  # overwrite in place
    assert files.listdir("/mnt/user-data/outputs") == (["a"], ["b.txt"])
    assert files.size("/mnt/user-data/outputs/b.txt") == 3
    assert files.is_file("/mnt/user-data/outputs/b.txt")
    assert files.is_dir("/mnt/user-data/outputs/a")
    with pytest.raises(FileAccessError, match="limit"):
        files.read_bytes("/mnt/user-data/outputs/b.txt", max_bytes=2)
    with pytest.raises(FileMissing):
        files.listdir("/mnt/user-data/outputs/nope")


def test_thread_ids_are_checked(tmp_path):
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(PathError):
            LocalThreadFiles(tmp_path, bad)


def test_the_file_store_comes_from_the_config(files, tmp_path, monkeypatch):
    assert files_from_config({"configurable": {FILES_KEY: files}}) is files
    monkeypatch.setenv("HITL_FILES_ROOT", str(tmp_path / "fallback"))
    fallback = files_from_config({"configurable": {"thread_id": "t-9"}})
    fallback.write_bytes("/mnt/user-data/workspace/a.txt", b"x")
    assert (tmp_path / "fallback/threads/t-9/workspace/a.txt").exists()
    with pytest.raises(FileAccessError, match="thread_id"):
        files_from_config({})


def test_artifact_reducer_keeps_order_and_drops_duplicates():
    assert merge_unique(["a", "b"], ["b", "c", "a", "d"]) == ["a", "b", "c", "d"]
    assert merge_unique(None, "x") == ["x"]
    assert merge_unique(["a", "a"], None) == ["a"]
    assert merge_dicts({"a": 1}, {"b": 2, "a": 3}) == {"a": 3, "b": 2}


def test_agents_do_not_import_django():
    code = (
        "import sys, agents.graphs.demo, agents.react, agents.tools, agents.models, "
        "agents.paths; print('django' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
