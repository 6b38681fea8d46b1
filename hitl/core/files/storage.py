"""Per-thread files in Django storage, and the requester's uploads.

Agents address files by virtual path (/mnt/user-data/{uploads,workspace,outputs}/...,
see agents/paths.py); here they live at `threads/<thread_id>/<area>/...` in
`default_storage`, through the storage API only: the local folder (MEDIA_ROOT) or an S3
bucket (HITL_FILES_S3_BUCKET), so web processes and workers on other hosts share them.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import os
import re
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.http import FileResponse

from agents.paths import (
    BaseThreadFiles,
    FileAccessError,
    FileMissing,
    NotAFile,
    VirtualPath,
    parse_virtual,
)
from hitl.core import errors
from hitl.core.access.permissions import user_can_run_thread, user_can_view_thread
from hitl.core.live import events
from hitl.core.models import Thread

log = logging.getLogger(__name__)
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
        """A folder: on a bucket, a prefix that some key continues (folders are not stored)."""
        local = self.host_path(vp)
        if local is not None:
            return os.path.isdir(local)
        try:
            dirs, files = self.storage.listdir(self._name(vp))
        except (FileNotFoundError, NotADirectoryError, NotImplementedError):
            return False
        return bool(dirs or files)

    def require_file(self, path: str | VirtualPath) -> VirtualPath:
        if self.host_root() is not None:
            return super().require_file(path)
        # A bucket: one HEAD settles the common case. A key is never also a folder
        # (_write refuses both ways), so an object found is a file.
        vp = self.resolve(path)
        if vp.parts and self.storage.exists(self._name(vp)):
            return vp
        if self._is_dir(vp):
            raise NotAFile(f"{vp.virtual} is a directory, not a file.")
        raise FileMissing(f"{vp.virtual} does not exist.")

    def _size(self, vp: VirtualPath) -> int:
        return self.storage.size(self._name(vp))

    def _read(self, vp: VirtualPath, limit: int | None) -> bytes:
        with self.storage.open(self._name(vp), "rb") as fh:
            return fh.read() if limit is None else fh.read(limit + 1)

    def _write(self, vp: VirtualPath, data: bytes) -> None:
        name = self._name(vp)
        # A bucket has no folders to refuse a key below a file, as a disk does: refuse it
        # here, the same on both.
        for depth in range(1, len(vp.parts)):
            above = VirtualPath(vp.area, vp.parts[:depth])
            if self.storage.exists(self._name(above)) and not self._is_dir(above):
                raise NotAFile(f"{above.virtual} is a file; it cannot hold {vp.virtual}.")
        if self.storage.get_available_name(name) != name:
            # A storage that never replaces (the local folder) would pick another name.
            self.storage.delete(name)
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


class FilesUnavailable(errors.ServiceError):
    """The file store failed (a bucket that refused or did not answer, a disk error)."""

    status_code = 503


def unavailable(exc: OSError) -> FilesUnavailable:
    log.warning("the thread files' store failed: %s", exc)
    return FilesUnavailable("The file store did not answer; try again in a moment.")


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
    try:
        while files.exists(vp):  # never replace an earlier upload
            vp = parse_virtual(f"/mnt/user-data/uploads/{stem}-{counter}{ext}")
            counter += 1
        files.write_bytes(vp, data)
    except FileAccessError as exc:
        raise errors.Invalid(str(exc)) from None
    except OSError as exc:
        raise unavailable(exc) from None
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
        vp = store.resolve(path)
        handle = store.open(vp)
    except FileMissing as exc:
        raise errors.NotFound(str(exc)) from None
    except FileAccessError as exc:
        raise errors.Invalid(str(exc)) from None
    except FileNotFoundError:  # removed between the check and the read
        raise errors.NotFound(f"{vp.virtual} does not exist.") from None
    except OSError as exc:
        raise unavailable(exc) from None
    mime = mimetypes.guess_type(vp.name)[0] or "application/octet-stream"
    # Streamed by this process, not redirected to a signed URL: every byte is behind the
    # permission check of this request, with HITL's headers, and the bucket needs no
    # address the browser can reach (docs/operating.md "Files in object storage").
    response = FileResponse(
        handle,
        as_attachment=not (inline and mime in INLINE_TYPES),
        filename=vp.name,
        content_type=mime,
    )
    download_headers(response, handle)
    return response


def download_headers(response: FileResponse, handle) -> None:
    """The headers every download of a thread file carries."""
    if "Content-Length" not in response:  # a stream from the bucket: FileResponse cannot tell
        response["Content-Length"] = str(handle.size)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
