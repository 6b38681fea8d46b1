"""File tools on the thread's virtual tree: present_files, view_image, list/read/write."""

from __future__ import annotations

import base64
import io
from typing import Annotated, Any

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel, Field, WithJsonSchema

from agents.paths import AREAS, VIRTUAL_ROOT, FileAccessError, ThreadFiles, VirtualPath
from agents.state import ImageRef
from agents.tools.base import parse_string_list, thread_files

OUTPUTS = f"{VIRTUAL_ROOT}/outputs"
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_READ_BYTES = 200_000
MAX_WRITE_BYTES = 5 * 1024 * 1024
MAX_PRESENTED = 50
TRANSIENT_PREFIX = "hitl-transient-image:"

# extension -> (mime type, Pillow format name)
IMAGE_TYPES = {
    ".png": ("image/png", "PNG"),
    ".jpg": ("image/jpeg", "JPEG"),
    ".jpeg": ("image/jpeg", "JPEG"),
    ".webp": ("image/webp", "WEBP"),
}
_MAGIC = {
    "PNG": lambda b: b.startswith(b"\x89PNG\r\n\x1a\n"),
    "JPEG": lambda b: b.startswith(b"\xff\xd8\xff"),
    "WEBP": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP",
}


def _checked(call):
    """Run a file operation; path problems become tool errors the model can act on."""
    try:
        return call()
    except FileAccessError as exc:
        raise ToolException(str(exc)) from None


# --- present_files ------------------------------------------------------------------


class PresentFilesArgs(BaseModel):
    filepaths: Annotated[
        list[str] | str, WithJsonSchema({"type": "array", "items": {"type": "string"}})
    ] = Field(description=f"Absolute paths of files under {OUTPUTS} to show the person.")


def check_presentable(files: ThreadFiles, filepaths: Any) -> list[str]:
    """Validate paths for present_files; all or nothing."""
    paths = parse_string_list(filepaths, field="filepaths")
    if not paths:
        raise ToolException("`filepaths` is empty: list the files to present.")
    if len(paths) > MAX_PRESENTED:
        raise ToolException(f"Present at most {MAX_PRESENTED} files at a time.")
    checked: list[str] = []
    for path in paths:
        vp = _checked(lambda path=path: files.resolve(path))
        if vp.area != "outputs" or not vp.parts:
            raise ToolException(
                f"Only files under {OUTPUTS} can be presented; {path!r} is not. Write or "
                f"copy the file to {OUTPUTS}/ first."
            )
        _checked(lambda vp=vp: files.require_file(vp))
        if vp.virtual not in checked:
            checked.append(vp.virtual)
    return checked


@tool("present_files", args_schema=PresentFilesArgs)
def present_files(filepaths: Any, runtime: ToolRuntime) -> Command:
    """Show finished files to the person: they appear in the thread for download.

    Only files under /mnt/user-data/outputs can be presented.
    """
    checked = check_presentable(thread_files(runtime), filepaths)
    names = ", ".join(p.rsplit("/", 1)[-1] for p in checked)
    return Command(
        update={
            "artifacts": checked,
            "messages": [
                ToolMessage(
                    content=f"Presented {len(checked)} file(s) to the person: {names}.",
                    artifact={"paths": checked},
                    name="present_files",
                    tool_call_id=runtime.tool_call_id or "",
                )
            ],
        }
    )


# --- view_image ---------------------------------------------------------------------


def check_image(
    files: ThreadFiles, image_path: Any, *, max_bytes: int = MAX_IMAGE_BYTES
) -> tuple[ImageRef, bytes]:
    """Validate an image file and return its reference and bytes."""
    vp: VirtualPath = _checked(lambda: files.require_file(image_path))
    kind = IMAGE_TYPES.get(vp.suffix)
    if kind is None:
        raise ToolException(
            f"{vp.virtual} is not a supported image; use a .png, .jpg, .jpeg or .webp file."
        )
    mime, pil_format = kind
    size = _checked(lambda: files.size(vp))
    if size > max_bytes:
        raise ToolException(
            f"{vp.virtual} is {size} bytes; images may be at most {max_bytes} bytes. "
            "Make a smaller copy first."
        )
    data = _checked(lambda: files.read_bytes(vp, max_bytes=max_bytes))
    if not _MAGIC[pil_format](data) or not _pillow_agrees(data, pil_format):
        raise ToolException(
            f"{vp.virtual} does not contain {pil_format} image data although its name "
            "says so; it may be corrupt or mislabelled."
        )
    return {"mime_type": mime, "size": size, "path": vp.virtual}, data


def _pillow_agrees(data: bytes, pil_format: str) -> bool:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != pil_format:
                return False
            image.verify()
        return True
    except Exception:  # any decoder complaint means "not that image type"
        return False


def make_view_image(*, max_bytes: int = MAX_IMAGE_BYTES) -> BaseTool:
    @tool("view_image")
    def view_image(image_path: str, runtime: ToolRuntime) -> Command:
        """Look at an image file (png, jpg, jpeg, webp) under /mnt/user-data.

        The image is shown to you on your next turn.
        """
        ref, _ = check_image(thread_files(runtime), image_path, max_bytes=max_bytes)
        return Command(
            update={
                "viewed_images": {ref["path"]: ref},
                "messages": [
                    ToolMessage(
                        content=(
                            f"Loaded {ref['path']} ({ref['mime_type']}, {ref['size']} bytes); "
                            "the image follows with this turn."
                        ),
                        artifact=dict(ref),
                        name="view_image",
                        tool_call_id=runtime.tool_call_id or "",
                    )
                ],
            }
        )

    view_image.handle_tool_error = True
    return view_image


view_image = make_view_image()


def transient_image_message(files: ThreadFiles, messages: list[Any]) -> HumanMessage | None:
    """The images viewed in the latest tool round, as one message for the next model call.

    Built fresh for each call and never returned as a state update, so the base64
    never reaches a checkpoint.
    """
    refs: list[dict[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        if (
            message.name == "view_image"
            and message.status != "error"
            and isinstance(message.artifact, dict)
            and message.artifact.get("path")
        ):
            refs.append(message.artifact)
    if not refs:
        return None
    blocks: list[dict[str, Any]] = []
    for ref in reversed(refs):
        try:
            _, data = check_image(files, ref["path"])
        except ToolException as exc:
            blocks.append({"type": "text", "text": f"(Image unavailable: {exc})"})
            continue
        blocks.append({"type": "text", "text": f"Image {ref['path']}:"})
        blocks.append(
            {
                "type": "image",
                "base64": base64.b64encode(data).decode("ascii"),
                "mime_type": ref["mime_type"],
            }
        )
    return HumanMessage(content=blocks, id=TRANSIENT_PREFIX + refs[0]["path"])


def is_transient(message: Any) -> bool:
    """True for the per-call image message (scripts must not take it for a new request)."""
    return str(getattr(message, "id", "") or "").startswith(TRANSIENT_PREFIX)


# --- list / read / write ------------------------------------------------------------


@tool("list_files")
def list_files(runtime: ToolRuntime, path: str = VIRTUAL_ROOT) -> str:
    """List a directory of this thread's files (uploads, workspace, outputs)."""
    files = thread_files(runtime)
    if path.rstrip("/") == VIRTUAL_ROOT:
        return "\n".join(f"{VIRTUAL_ROOT}/{area}/" for area in AREAS)
    dirs, names = _checked(lambda: files.listdir(path))
    base = path.rstrip("/")
    lines = [f"{base}/{d}/" for d in dirs] + [f"{base}/{n}" for n in names]
    return "\n".join(lines) if lines else f"{base}/ is empty."


@tool("read_file")
def read_file(path: str, runtime: ToolRuntime) -> str:
    """Read a text file of this thread (e.g. an upload under /mnt/user-data/uploads)."""
    data = _checked(lambda: thread_files(runtime).read_bytes(path, max_bytes=MAX_READ_BYTES))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolException(f"{path} is not UTF-8 text; it cannot be shown as text.") from None


@tool("write_file")
def write_file(path: str, content: str, runtime: ToolRuntime) -> str:
    """Write a UTF-8 text file under /mnt/user-data/workspace or /mnt/user-data/outputs."""
    files = thread_files(runtime)
    vp = _checked(lambda: files.resolve(path))
    if vp.area not in ("workspace", "outputs"):
        raise ToolException(
            f"Uploads are read-only; write under {VIRTUAL_ROOT}/workspace or {OUTPUTS}."
        )
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolException(f"Content too large ({len(data)} bytes, at most {MAX_WRITE_BYTES}).")
    _checked(lambda: files.write_bytes(vp, data))
    return f"Wrote {len(data)} bytes to {vp.virtual}."


for _tool in (present_files, list_files, read_file, write_file):
    _tool.handle_tool_error = True
