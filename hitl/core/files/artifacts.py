"""Presented files become Artifact rows; the agent's final result lands on its run."""

from __future__ import annotations

import logging
import mimetypes
from typing import Any

from django.db import IntegrityError, transaction

from agents.paths import FileAccessError, parse_virtual
from hitl.core.files.storage import StorageThreadFiles, thread_files
from hitl.core.live import events
from hitl.core.models import Artifact, Run, Thread

log = logging.getLogger(__name__)


def artifact_register(
    *, thread: Thread, path: str, files: StorageThreadFiles | None = None
) -> Artifact:
    """Create or refresh the Artifact for a presented file (idempotent per thread + path).

    Raises FileAccessError when the path is not a file under /mnt/user-data/outputs.
    """
    vp = parse_virtual(path)
    if vp.area != "outputs" or not vp.parts:
        raise FileAccessError(f"Only files under /mnt/user-data/outputs are artifacts: {path}")
    files = files or thread_files(thread.pk)
    sha256, size = files.sha256(vp)
    values = {
        "size": size,
        "sha256": sha256,
        "mime": mimetypes.guess_type(vp.name)[0] or "application/octet-stream",
    }
    try:
        with transaction.atomic():
            artifact, created = Artifact.objects.get_or_create(
                thread=thread, path=vp.virtual, defaults=values
            )
    except IntegrityError:  # registered concurrently by another worker
        artifact, created = Artifact.objects.get(thread=thread, path=vp.virtual), False
    if not created and any(getattr(artifact, k) != v for k, v in values.items()):
        # The agent rewrote the file: the row follows the current bytes.
        for key, value in values.items():
            setattr(artifact, key, value)
        artifact.save(update_fields=list(values))
    return artifact


def run_outputs_record(*, run_id: Any, values: dict[str, Any] | None) -> list[Artifact]:
    """After a run step: register the state's presented files and store its final result."""
    values = values or {}
    if not values.get("artifacts") and not values.get("final_result"):
        return []  # most graphs have neither: no queries
    run = Run.objects.select_related("thread").filter(pk=run_id).one_or_none()
    if run is None:
        return []
    thread = run.thread
    files = thread_files(thread.pk)
    recorded: list[Artifact] = []
    paths = values.get("artifacts")
    for path in paths if isinstance(paths, list) else []:
        try:
            recorded.append(artifact_register(thread=thread, path=path, files=files))
        except (FileAccessError, OSError) as exc:
            # A file the agent presented and then removed must not fail the run.
            log.warning("artifact %r of thread %s not registered: %s", path, thread.pk, exc)
    final = values.get("final_result")
    if isinstance(final, dict) and final != run.final_result:
        Run.objects.filter(pk=run.pk).update(final_result=final)
    if recorded:
        events.publish_thread_event(
            thread.pk,
            {
                "type": "CUSTOM",
                "name": "artifacts",
                "value": [artifact_json(a) for a in recorded],
            },
        )
    return recorded


def artifact_json(artifact: Artifact) -> dict[str, Any]:
    return {
        "id": str(artifact.pk),
        "path": artifact.path,
        "name": artifact.path.rsplit("/", 1)[-1],
        "size": artifact.size,
        "mime": artifact.mime,
        "sha256": artifact.sha256,
        "created_at": artifact.created_at.isoformat(),
    }
