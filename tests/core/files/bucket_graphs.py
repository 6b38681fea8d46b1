"""A graph the bucket tests register (HITL_EXTRA_GRAPHS=BUCKET_GRAPHS): it asks for the
requester's files, then looks at them with the built-in tools and writes what it saw."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage

from agents.models import get_model, reply, tool_results
from agents.react import build_react_agent

TARGETS = {"upload_reader": "tests.core.files.bucket_graphs:upload_reader"}
BUCKET_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())
PHOTO = "/mnt/user-data/uploads/photo.png"
NOTES = "/mnt/user-data/uploads/notes.txt"
SEEN = "/mnt/user-data/outputs/seen.txt"


def _script(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
    done = tool_results(messages)
    if "ask_clarification" not in done:
        question = "Upload photo.png and notes.txt, then say go."
        return reply(
            "", ("ask_clarification", {"question": question, "clarification_type": "missing_info"})
        )
    if "view_image" not in done:
        return reply("", ("view_image", {"image_path": PHOTO}))
    if "read_file" not in done:
        return reply("", ("read_file", {"path": NOTES}))
    if "write_file" not in done:
        image = done["view_image"]
        seen = f"view_image {image.status}: {image.text}\nnotes: {done['read_file'].text}"
        return reply("", ("write_file", {"path": SEEN, "content": seen}))
    if "present_files" not in done:
        return reply("", ("present_files", {"filepaths": [SEEN]}))
    return reply("Done.")


upload_reader = build_react_agent(get_model("scripted", script=_script))
