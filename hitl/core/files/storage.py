"""Per-thread files in Django storage, and the requester's uploads.

Agents address files by virtual path (/mnt/user-data/{uploads,workspace,outputs}/...,
see agents/paths.py); here they live at `threads/<thread_id>/<area>/...` in
`default_storage`, through the storage API only, so another backend can serve them.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.http import FileResponse

from agents.paths import BaseThreadFiles, FileAccessError, FileMissing, VirtualPath, parse_virtual
from hitl.core import errors
from hitl.core.access.permissions import user_can_run_thread, user_can_view_thread
from hitl.core.live import events
from hitl.core.models import Thread

_UNSAFE_NAME = re.compile(r"[^\w.\- ()+]")
# Shown in the browser when asked to; everything else (HTML, SVG, ...) is an attachment.
INLINE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "text/plain", "text/csv")


def thread_root(thread_id: Any) -> str:
    return f"threads/{thread_id}"


class StorageThreadFiles(BaseThreadFiles):
    """A thread's files in a Django storage backend."""

    def __init__(self, thread_id: Any, storage: Storage | None = None):
        super().__init__(str(thread_id))
        self.storage = storage if storage is not None else default_storage

    def name(self, path: str | VirtualPath) -> str:
        """The storage name of a (validated) virtual path."""
        vp = self.resolve(path)
        return f"{thread_root(self.thread_id)}/{vp.key}"

    def _name(self, vp: VirtualPath) -> str:
        return f"{thread_root(self.thread_id)}/{vp.key}"

    def _local(self, name: str) -> str | None:
        try:
            return self.storage.path(name)
        except NotImplementedError:  # remote storage: no host paths, no symlinks
            return None

    def host_root(self) -> str | None:
        return self._local(thread_root(self.thread_id))

    def host_path(self, vp: VirtualPath) -> str | None:
        return self._local(self._name(vp))

    def _exists(self, vp: VirtualPath) -> bool:
        local = self.host_path(vp)
        if local is not None:
            return os.path.exists(local)
        return self.storage.exists(self._name(vp)) or self._is_dir(vp)

    def _is_dir(self, vp: VirtualPath) -> bool:
        local = self.host_path(vp)
        if local is not None:
            return os.path.isdir(local)
        try:
            dirs, files = self.storage.listdir(self._name(vp))
        except (FileNotFoundError, NotADirectoryError, NotImplementedError):
            return False
        return bool(dirs or files)

    def _size(self, vp: VirtualPath) -> int:
        return self.storage.size(self._name(vp))

    def _read(self, vp: VirtualPath, limit: int | None) -> bytes:
        with self.storage.open(self._name(vp), "rb") as fh:
            return fh.read() if limit is None else fh.read(limit + 1)

    def _write(self, vp: VirtualPath, data: bytes) -> None:
        name = self._name(vp)
        if self.storage.exists(name):
            self.storage.delete(name)  # overwrite: save() would pick another name
        saved = self.storage.save(name, ContentFile(data))
        if saved != name:
            self.storage.delete(saved)
            raise FileAccessError(f"Could not write {vp.virtual}: the storage renamed it.")

    def _listdir(self, vp: VirtualPath) -> tuple[list[str], list[str]]:
        return self.storage.listdir(self._name(vp))

    def open(self, path: str | VirtualPath):
        """Open a file for reading (for downloads and hashing)."""
        return self.storage.open(self._name(self.require_file(path)), "rb")

    def sha256(self, path: str | VirtualPath) -> tuple[str, int]:
        digest, size = hashlib.sha256(), 0
        with self.open(path) as fh:
            for chunk in iter(lambda: fh.read(1 << 16), b""):
                digest.update(chunk)
                size += len(chunk)
        return digest.hexdigest(), size


def thread_files(thread_id: Any) -> StorageThreadFiles:
    return StorageThreadFiles(thread_id)


# --- uploads ------------------------------------------------------------------------


class TooLarge(errors.ServiceError):
    status_code = 413


# Most file systems cap a name at 255 bytes; a stem and an extension this long, plus the
# "-<n>" a repeated name gets, always fit.
MAX_STEM_BYTES = 120
MAX_EXT_BYTES = 24


def _clip(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` of UTF-8, never inside a character."""
    return text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")


def upload_name(raw: str) -> str:
    """A safe file name from a client-supplied one (no directories, no hidden files).

    Names that keep no usable character ("", ".", "..", "...") are refused with a 400;
    overlong names are shortened to fit any file system (the extension is kept).
    """
    name = os.path.basename((raw or "").replace("\\", "/")).strip()
    name = _UNSAFE_NAME.sub("_", name).lstrip(". ").rstrip()
    stem, ext = os.path.splitext(name)
    if not stem:
        raise errors.Invalid(
            f"The file name {raw!r} has no usable characters: name the file (e.g. data.csv)."
        )
    return _clip(stem, MAX_STEM_BYTES).rstrip() + _clip(ext, MAX_EXT_BYTES)


def thread_file_upload(*, thread: Thread, user, name: str, content) -> dict[str, Any]:
    """Store a requester's file in the thread's uploads; returns its virtual path."""
    if not user_can_view_thread(user, thread):
        raise errors.NotFound("No such thread.")
    if not user_can_run_thread(user, thread):
        raise errors.Forbidden(
            "Only the thread's requester (or a user with the hitl.run_any_thread "
            "permission) can upload files to it."
        )
    limit = settings.HITL_MAX_UPLOAD_BYTES
    size = getattr(content, "size", None)
    if size is not None and size > limit:
        raise TooLarge(f"The file is {size} bytes; uploads may be at most {limit} bytes.")
    data = content.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"The file is larger than {limit} bytes; uploads may be at most {limit}.")
    files = thread_files(thread.pk)
    filename = upload_name(name)
    stem, ext = os.path.splitext(filename)
    vp = parse_virtual(f"/mnt/user-data/uploads/{filename}")
    counter = 2
    while files.exists(vp):  # never replace an earlier upload
        vp = parse_virtual(f"/mnt/user-data/uploads/{stem}-{counter}{ext}")
        counter += 1
    try:
        files.write_bytes(vp, data)
    except FileAccessError as exc:
        raise errors.Invalid(str(exc)) from None
    result = {
        "path": vp.virtual,
        "name": vp.name,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    events.publish_thread_event(
        thread.pk, {"type": "CUSTOM", "name": "file_uploaded", "value": result}
    )
    return result


def thread_file_response(*, thread: Thread, path: str, inline: bool = False) -> FileResponse:
    """A download of one thread file; callers check that the user may view the thread."""
    store = thread_files(thread.pk)
    try:
        vp = store.require_file(path)
    except FileMissing as exc:
        raise errors.NotFound(str(exc)) from None
    except FileAccessError as exc:
        raise errors.Invalid(str(exc)) from None
    mime = mimetypes.guess_type(vp.name)[0] or "application/octet-stream"
    response = FileResponse(
        store.open(vp),
        as_attachment=not (inline and mime in INLINE_TYPES),
        filename=vp.name,
        content_type=mime,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
