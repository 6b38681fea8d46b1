"""Assistants: each registered graph is a default assistant (no config of its own);
stored ones are configured variants of a graph, with versions (LangGraph's model)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction

from hitl.core import audit
from hitl.core.access.permissions import user_can_change_assistant
from hitl.core.errors import Conflict, Forbidden, Invalid, NotFound, check_storable
from hitl.core.models import Assistant, AssistantVersion
from hitl.core.registry import registry
from hitl.core.runs.config import check_config, run_config_merge
from hitl.core.runs.inputs import graph_description

DEFAULT_NAMESPACE = uuid.UUID("6f1d5a52-3f7e-4c7b-9f35-7d0f3c4b2a11")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class AssistantSpec:
    """An assistant as the API shows it: a stored row's current version, or a default."""

    assistant_id: str
    graph: str
    name: str
    description: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    version: int = 1
    created_at: datetime = EPOCH
    updated_at: datetime = EPOCH
    is_default: bool = False
    row: Assistant | None = None


def default_assistant_id(graph: str) -> str:
    """A stable assistant id per registered graph (LangGraph's default assistants)."""
    return str(uuid.uuid5(DEFAULT_NAMESPACE, graph))


def _default(graph: str) -> AssistantSpec:
    return AssistantSpec(
        assistant_id=default_assistant_id(graph),
        graph=graph,
        name=graph,
        description=graph_description(graph) or None,
        metadata={"created_by": "system", "target": registry.targets[graph]},
        is_default=True,
    )


def _spec(row: Assistant) -> AssistantSpec:
    return AssistantSpec(
        assistant_id=str(row.pk),
        graph=row.graph,
        name=row.name,
        description=row.description or None,
        config=row.config or {},
        context=row.context or {},
        metadata=row.metadata or {},
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        row=row,
    )


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (ValueError, AttributeError, TypeError):
        return None


def assistant_get(assistant_id: str) -> AssistantSpec:
    """The assistant an id names: a stored one, a default one, or a graph's name (as
    LangGraph also accepts). A 404 otherwise."""
    assistant_id = str(assistant_id)
    if assistant_id in registry.targets:
        return _default(assistant_id)
    for name in registry.names():
        if default_assistant_id(name) == assistant_id:
            return _default(name)
    pk = _as_uuid(assistant_id)
    row = Assistant.objects.filter(pk=pk).first() if pk else None
    if row is None or row.graph not in registry.targets:
        raise NotFound(
            f"No assistant {assistant_id!r}; registered graphs: {', '.join(registry.names())}."
        )
    return _spec(row)


def assistant_graph(assistant_id: str) -> str:
    return assistant_get(assistant_id).graph


def assistant_list(
    *, graph: str | None = None, name: str | None = None, metadata: dict[str, Any] | None = None
) -> list[AssistantSpec]:
    """Every assistant (defaults first, then stored), filtered as assistants.search does."""
    defaults = [_default(g) for g in registry.names() if graph in (None, g)]
    rows = Assistant.objects.filter(graph__in=list(registry.targets))
    if graph is not None:
        rows = rows.filter(graph=graph)
    if name:
        rows = rows.filter(name__icontains=name)
        defaults = [a for a in defaults if name.lower() in a.name.lower()]
    found = defaults + [_spec(r) for r in rows.order_by("created_at")]
    if metadata:
        found = [a for a in found if metadata.items() <= a.metadata.items()]
    return found


def _check_graph(graph: Any) -> str:
    if not isinstance(graph, str) or graph not in registry.targets:
        raise NotFound(f"No graph {graph!r}; registered: {', '.join(registry.names())}.")
    return graph


def _check_object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{what} must be a JSON object.")
    return check_storable(value, what)


def _check_context(context: Any) -> dict[str, Any]:
    """An assistant's context: what a run's context may be (run_config_merge's check)."""
    return run_config_merge(config=None, context=context)[1]


def _stored(assistant_id: str, *, user, lock: bool = True) -> Assistant:
    spec = assistant_get(assistant_id)
    if spec.is_default:
        raise Conflict(
            f"Assistant {assistant_id!r} is the default assistant of graph {spec.graph!r} "
            "(settings.HITL_GRAPHS): it cannot be changed; create an assistant instead."
        )
    qs = Assistant.objects.select_for_update() if lock else Assistant.objects
    row = qs.get(pk=spec.row.pk)  # type: ignore[union-attr]
    if not user_can_change_assistant(user, row):
        raise Forbidden(
            "Only the assistant's creator (or a user with the hitl.change_assistant "
            "permission) can change it."
        )
    return row


def _save_version(row: Assistant) -> None:
    AssistantVersion.objects.create(
        assistant=row,
        version=row.version,
        graph=row.graph,
        name=row.name,
        description=row.description,
        config=row.config,
        context=row.context,
        metadata=row.metadata,
    )


def _audit(kind: str, row: Assistant, user) -> None:
    audit.audit_record(
        kind=kind,
        actor=user,
        data={"assistant_id": str(row.pk), "graph_id": row.graph, "version": row.version},
    )


@dataclass(frozen=True)
class AssistantFields:
    """What a client says of an assistant besides its graph (None: not given)."""

    config: Any = None
    context: Any = None
    metadata: Any = None
    name: str | None = None
    description: str | None = None


def assistant_create(
    *,
    user,
    graph: Any,
    fields: AssistantFields = AssistantFields(),
    assistant_id: Any = None,
    if_exists: str = "raise",
) -> AssistantSpec:
    """Create an assistant at version 1 (`if_exists="do_nothing"` returns an existing one)."""
    config, context, metadata = fields.config, fields.context, fields.metadata
    name, description = fields.name, fields.description
    graph = _check_graph(graph)
    config, context = check_config(config), _check_context(context)
    metadata = _check_object(metadata, "metadata")
    check_storable(name, "name")
    check_storable(description, "description")
    pk = uuid.uuid4()
    if assistant_id is not None:
        pk = _as_uuid(assistant_id)
        if pk is None:
            raise Invalid("assistant_id must be a UUID.")
        defaults = {default_assistant_id(g): g for g in registry.names()}
        if str(pk) in defaults:
            if if_exists == "do_nothing":  # LangGraph Server returns the existing one
                return _default(defaults[str(pk)])
            raise Conflict(f"Assistant {pk} already exists.")
        existing = Assistant.objects.filter(pk=pk).first()
        if existing is not None:
            if if_exists == "do_nothing":
                return _spec(existing)
            raise Conflict(f"Assistant {pk} already exists.")
    try:
        with transaction.atomic():
            row = Assistant.objects.create(
                id=pk,
                graph=graph,
                name=(name or "Untitled")[:200],
                description=description or "",
                config=config,
                context=context,
                metadata=metadata,
                version=1,
                created_by=user if user is not None and user.is_authenticated else None,
            )
            _save_version(row)
            _audit(audit.Kind.ASSISTANT_CREATED, row, user)
    except IntegrityError:  # created concurrently under the same id
        if if_exists == "do_nothing":
            return _spec(Assistant.objects.get(pk=pk))
        raise Conflict(f"Assistant {pk} already exists.") from None
    return _spec(row)


def assistant_update(
    *,
    user,
    assistant_id: str,
    graph: Any = None,
    config: Any = None,
    context: Any = None,
    metadata: Any = None,
    name: str | None = None,
    description: str | None = None,
) -> AssistantSpec:
    """Save a new version (the latest + 1) and make it current, as LangGraph's PATCH:
    config and context are replaced when given, metadata is merged."""
    if graph is not None:
        _check_graph(graph)
    config = check_config(config) if config is not None else None
    context = _check_context(context) if context is not None else None
    metadata = _check_object(metadata, "metadata")
    check_storable(name, "name")
    check_storable(description, "description")
    with transaction.atomic():
        row = _stored(assistant_id, user=user)
        latest = row.versions.order_by("-version").values_list("version", flat=True).first()
        row.version = (latest or row.version) + 1
        if graph is not None:
            row.graph = graph
        if config is not None:
            row.config = config
        if context is not None:
            row.context = context
        if name is not None:
            row.name = name[:200]
        if description is not None:
            row.description = description
        row.metadata = {**(row.metadata or {}), **metadata}
        row.save()
        _save_version(row)
        _audit(audit.Kind.ASSISTANT_UPDATED, row, user)
    return _spec(row)


def assistant_set_latest(*, user, assistant_id: str, version: Any) -> AssistantSpec:
    """Make an earlier (or later) saved version the assistant's current one."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise Invalid("version must be an integer.")
    with transaction.atomic():
        row = _stored(assistant_id, user=user)
        saved = row.versions.filter(version=version).first()
        if saved is None:
            raise NotFound(f"Assistant {assistant_id} has no version {version}.")
        for name in ("graph", "name", "description", "config", "context", "metadata"):
            setattr(row, name, getattr(saved, name))
        row.version = version
        row.save()
        _audit(audit.Kind.ASSISTANT_UPDATED, row, user)
    return _spec(row)


def assistant_delete(*, user, assistant_id: str) -> None:
    with transaction.atomic():
        row = _stored(assistant_id, user=user)
        _audit(audit.Kind.ASSISTANT_DELETED, row, user)
        row.delete()


def assistant_versions(
    assistant_id: str, *, metadata: dict[str, Any] | None = None
) -> list[AssistantSpec]:
    """An assistant's saved versions, newest first (a default one has its one version)."""
    spec = assistant_get(assistant_id)
    if spec.is_default:
        found = [spec]
    else:
        found = [
            AssistantSpec(
                assistant_id=spec.assistant_id,
                graph=v.graph,
                name=v.name,
                description=v.description or None,
                config=v.config or {},
                context=v.context or {},
                metadata=v.metadata or {},
                version=v.version,
                created_at=v.created_at,
                updated_at=v.created_at,
            )
            for v in AssistantVersion.objects.filter(assistant_id=spec.row.pk).order_by("-version")  # type: ignore[union-attr]
        ]
    if metadata:
        found = [a for a in found if metadata.items() <= a.metadata.items()]
    return found
