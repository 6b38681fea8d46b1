"""Virtual paths and the per-thread file store the agent tools work on.

Agents see one tree per thread: /mnt/user-data/{uploads,workspace,outputs}. It maps to
`threads/<thread_id>/{uploads,workspace,outputs}` in a file store that the runner
injects through `config["configurable"]["hitl_files"]` (Django storage in HITL, a
local directory in tests). Only paths inside that tree are ever read or written: no
relative paths, no "..", no host paths, and no symlink may lead out of the thread root.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

VIRTUAL_ROOT = "/mnt/user-data"
AREAS = ("uploads", "workspace", "outputs")
FILES_KEY = "hitl_files"  # config["configurable"] key; objects there are not checkpointed
MAX_PATH_CHARS = 1024
MAX_PART_CHARS = 255

_THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class FileAccessError(ValueError):
    """A path or file the tools refuse; the message tells the model what to do instead."""


class PathError(FileAccessError):
    """The path itself is not allowed."""


class FileMissing(FileAccessError):
    pass


class NotAFile(FileAccessError):
    pass


@dataclass(frozen=True)
class VirtualPath:
    area: str
    parts: tuple[str, ...] = ()

    @property
    def virtual(self) -> str:
        return "/".join((VIRTUAL_ROOT, self.area, *self.parts))

    @property
    def key(self) -> str:
        """The path relative to the thread root, e.g. "outputs/report.csv"."""
        return "/".join((self.area, *self.parts))

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else self.area

    @property
    def suffix(self) -> str:
        return os.path.splitext(self.name)[1].lower()

    def child(self, name: str) -> VirtualPath:
        return parse_virtual(f"{self.virtual}/{name}")

    def __str__(self) -> str:
        return self.virtual


def _hint() -> str:
    return f"use an absolute path under {VIRTUAL_ROOT}/{{{','.join(AREAS)}}}, e.g. {VIRTUAL_ROOT}/outputs/report.csv"


def parse_virtual(path: Any) -> VirtualPath:
    """Validate a virtual path and split it into its area and parts."""
    if not isinstance(path, str) or not path.strip():
        raise PathError(f"A path must be a non-empty string; {_hint()}.")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"Path too long ({len(path)} characters, at most {MAX_PATH_CHARS}).")
    if _CONTROL.search(path):
        raise PathError("Paths may not contain control characters.")
    if "\\" in path:
        raise PathError(f"Use forward slashes in paths; {_hint()}.")
    if not path.startswith("/"):
        raise PathError(f"Relative paths are not allowed ({path!r}); {_hint()}.")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise PathError(f"'.' and '..' are not allowed in paths ({path!r}); {_hint()}.")
    root = VIRTUAL_ROOT.strip("/").split("/")
    if parts[: len(root)] != root:
        raise PathError(
            f"{path!r} is outside this thread's files (host paths and other threads' "
            f"files are off limits); {_hint()}."
        )
    rest = parts[len(root) :]
    if not rest or rest[0] not in AREAS:
        where = rest[0] if rest else ""
        raise PathError(
            f"Unknown area {where!r} in {path!r}; only {', '.join(AREAS)} exist under "
            f"{VIRTUAL_ROOT}."
        )
    for part in rest[1:]:
        if len(part) > MAX_PART_CHARS:
            raise PathError(f"Path component too long ({len(part)} characters).")
    return VirtualPath(rest[0], tuple(rest[1:]))


@runtime_checkable
class ThreadFiles(Protocol):
    """One thread's files, addressed by virtual path. Every method validates the path."""

    thread_id: str

    def resolve(self, path: str) -> VirtualPath: ...

    def exists(self, path: str) -> bool: ...

    def is_file(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def read_bytes(self, path: str, *, max_bytes: int | None = None) -> bytes: ...

    def write_bytes(self, path: str, data: bytes) -> VirtualPath: ...

    def listdir(self, path: str) -> tuple[list[str], list[str]]: ...


class BaseThreadFiles:
    """Path checks shared by every file store; subclasses implement the `_` primitives."""

    def __init__(self, thread_id: str):
        thread_id = str(thread_id)
        if not _THREAD_ID.match(thread_id):
            raise PathError(f"Invalid thread id {thread_id!r} for the file store.")
        self.thread_id = thread_id

    # -- backend primitives (keys are validated "area/part/..." strings) --------------

    def host_root(self) -> str | None:
        """The thread root on the local filesystem, if the backend has one."""
        return None

    def host_path(self, vp: VirtualPath) -> str | None:
        return None

    def _exists(self, vp: VirtualPath) -> bool:
        raise NotImplementedError

    def _is_dir(self, vp: VirtualPath) -> bool:
        raise NotImplementedError

    def _size(self, vp: VirtualPath) -> int:
        raise NotImplementedError

    def _read(self, vp: VirtualPath, limit: int | None) -> bytes:
        raise NotImplementedError

    def _write(self, vp: VirtualPath, data: bytes) -> None:
        raise NotImplementedError

    def _listdir(self, vp: VirtualPath) -> tuple[list[str], list[str]]:
        raise NotImplementedError

    # -- the checked API -----------------------------------------------------------

    def resolve(self, path: str | VirtualPath) -> VirtualPath:
        """Validate `path` and make sure it does not lead out of the thread root."""
        vp = path if isinstance(path, VirtualPath) else parse_virtual(path)
        host = self.host_path(vp)
        root = self.host_root()
        if host is not None and root is not None:
            # realpath resolves every symlink on the way, including ones that do not
            # exist yet below a linked directory, so writes are covered too.
            real_root = os.path.realpath(root)
            real = os.path.realpath(host)
            if real != real_root and not real.startswith(real_root + os.sep):
                raise PathError(
                    f"{vp.virtual} is a link that leads outside this thread's files; "
                    "it cannot be read or written."
                )
        return vp

    def exists(self, path: str | VirtualPath) -> bool:
        return self._exists(self.resolve(path))

    def is_dir(self, path: str | VirtualPath) -> bool:
        vp = self.resolve(path)
        return self._exists(vp) and self._is_dir(vp)

    def is_file(self, path: str | VirtualPath) -> bool:
        vp = self.resolve(path)
        return self._exists(vp) and not self._is_dir(vp)

    def require_file(self, path: str | VirtualPath) -> VirtualPath:
        vp = self.resolve(path)
        if not self._exists(vp):
            raise FileMissing(f"{vp.virtual} does not exist.")
        if self._is_dir(vp):
            raise NotAFile(f"{vp.virtual} is a directory, not a file.")
        return vp

    def size(self, path: str | VirtualPath) -> int:
        return self._size(self.require_file(path))

    def read_bytes(self, path: str | VirtualPath, *, max_bytes: int | None = None) -> bytes:
        vp = self.require_file(path)
        if max_bytes is not None:
            size = self._size(vp)
            if size > max_bytes:
                raise FileAccessError(
                    f"{vp.virtual} is {size} bytes; the limit here is {max_bytes} bytes."
                )
        data = self._read(vp, max_bytes)
        if max_bytes is not None and len(data) > max_bytes:
            raise FileAccessError(f"{vp.virtual} is larger than {max_bytes} bytes.")
        return data

    def write_bytes(self, path: str | VirtualPath, data: bytes) -> VirtualPath:
        vp = self.resolve(path)
        if not vp.parts:
            raise NotAFile(f"{vp.virtual} is a directory; write to a file inside it.")
        if self._exists(vp) and self._is_dir(vp):
            raise NotAFile(f"{vp.virtual} is a directory; choose a file name.")
        self._write(vp, bytes(data))
        return vp

    def listdir(self, path: str | VirtualPath) -> tuple[list[str], list[str]]:
        vp = self.resolve(path)
        if not self._exists(vp):
            if not vp.parts:
                return [], []  # an area nobody wrote to yet is simply empty
            raise FileMissing(f"{vp.virtual} does not exist.")
        if not self._is_dir(vp):
            raise FileAccessError(f"{vp.virtual} is a file, not a directory.")
        dirs, files = self._listdir(vp)
        return sorted(dirs), sorted(files)


class LocalThreadFiles(BaseThreadFiles):
    """Thread files in a local directory: <base>/threads/<thread_id>/<area>/..."""

    def __init__(self, base: str | Path, thread_id: str):
        super().__init__(thread_id)
        self.base = Path(base)
        self.root = self.base / "threads" / self.thread_id

    def host_root(self) -> str:
        return str(self.root)

    def host_path(self, vp: VirtualPath) -> str:
        return str(self.root.joinpath(vp.area, *vp.parts))

    def _exists(self, vp: VirtualPath) -> bool:
        return os.path.exists(self.host_path(vp))  # a dangling link counts as missing

    def _is_dir(self, vp: VirtualPath) -> bool:
        return os.path.isdir(self.host_path(vp))

    def _size(self, vp: VirtualPath) -> int:
        return os.path.getsize(self.host_path(vp))

    def _read(self, vp: VirtualPath, limit: int | None) -> bytes:
        with open(self.host_path(vp), "rb") as fh:
            return fh.read() if limit is None else fh.read(limit + 1)

    def _write(self, vp: VirtualPath, data: bytes) -> None:
        target = Path(self.host_path(vp))
        target.parent.mkdir(parents=True, exist_ok=True)
        # Write aside and rename: readers never see half a file, and a symlink at the
        # target is replaced rather than followed.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _listdir(self, vp: VirtualPath) -> tuple[list[str], list[str]]:
        dirs, files = [], []
        for entry in os.scandir(self.host_path(vp)):
            if entry.name.startswith(".tmp-"):
                continue
            (dirs if entry.is_dir() else files).append(entry.name)
        return dirs, files


def files_from_config(config: Any) -> ThreadFiles:
    """The thread's file store from a RunnableConfig.

    HITL puts a storage-backed store under configurable["hitl_files"]. Outside HITL (a
    bare graph.invoke, `langgraph dev`) the files go to $HITL_FILES_ROOT (or a temp
    directory) under the config's thread_id.
    """
    configurable = (config or {}).get("configurable") or {}
    files = configurable.get(FILES_KEY)
    if files is not None:
        return files
    thread_id = configurable.get("thread_id")
    if not thread_id:
        raise FileAccessError(
            "No file store for this run: run the graph with a thread_id in its config."
        )
    base = os.environ.get("HITL_FILES_ROOT") or os.path.join(tempfile.gettempdir(), "hitl-files")
    return LocalThreadFiles(base, str(thread_id))
