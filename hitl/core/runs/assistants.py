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
from hitl.core.runs.inputs import graph_description

DEFAULT_NAMESPACE = uuid.UUID("6f1d5a52-3f7e-4c7b-9f35-7d0f3c4b2a11")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Configurable keys HITL sets itself on every run: an assistant may not set them.
RESERVED_CONFIGURABLE = frozenset(
    {"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "hitl_files", "hitl_ledger"}
)
# Top-level config keys a run takes from an assistant (LangGraph's RunnableConfig).
CONFIG_KEYS = frozenset({"configurable", "tags", "recursion_limit", "metadata", "run_name"})


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


def check_config(config: Any) -> dict[str, Any]:
    """An assistant's config: RunnableConfig keys only, HITL's configurable keys left alone."""
    config = _check_object(config, "config")
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise Invalid(f"Unsupported config key(s): {', '.join(unknown)}.")
    configurable = _check_object(config.get("configurable"), "config.configurable")
    reserved = sorted(k for k in configurable if k in RESERVED_CONFIGURABLE or k.startswith("__"))
    if reserved:
        raise Invalid(f"config.configurable may not set {', '.join(reserved)} (HITL sets them).")
    limit = config.get("recursion_limit")
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000
    ):
        raise Invalid("config.recursion_limit must be an integer from 1 to 10000.")
    return config


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


def assistant_create(
    *,
    user,
    graph: Any,
    config: Any = None,
    context: Any = None,
    metadata: Any = None,
    name: str | None = None,
    description: str | None = None,
    assistant_id: Any = None,
    if_exists: str = "raise",
) -> AssistantSpec:
    """Create an assistant at version 1 (`if_exists="do_nothing"` returns an existing one)."""
    graph = _check_graph(graph)
    config, context = check_config(config), _check_object(context, "context")
    metadata = _check_object(metadata, "metadata")
    check_storable(name, "name")
    check_storable(description, "description")
    pk = uuid.uuid4()
    if assistant_id is not None:
        pk = _as_uuid(assistant_id)
        if pk is None:
            raise Invalid("assistant_id must be a UUID.")
        if str(pk) in {default_assistant_id(g) for g in registry.names()}:
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
    context = _check_object(context, "context") if context is not None else None
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


def assistant_run_settings(
    assistant_id: str, version: int | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and context a run on this assistant starts with (the version it was
    created with); the run's own config and context go on top (LangGraph's order).
    Empty for a default assistant or one deleted since."""
    if not assistant_id or version is None:
        return {}, {}
    pk = _as_uuid(assistant_id)
    saved = (
        AssistantVersion.objects.filter(assistant_id=pk, version=version).first() if pk else None
    )
    if saved is None:
        return {}, {}
    return dict(saved.config or {}), dict(saved.context or {})


def merge_run_config(base: dict[str, Any], assistant_config: dict[str, Any]) -> dict[str, Any]:
    """`base` (HITL's own config of a run) with an assistant's config under it: its
    configurable keys, tags and recursion limit; HITL's own keys win."""
    merged = dict(base)
    configurable = {**(assistant_config.get("configurable") or {}), **base["configurable"]}
    merged["configurable"] = configurable
    if "recursion_limit" in assistant_config:
        merged["recursion_limit"] = assistant_config["recursion_limit"]
    if assistant_config.get("tags"):
        merged["tags"] = list(assistant_config["tags"])
    if assistant_config.get("metadata"):
        merged["metadata"] = {**assistant_config["metadata"], **base.get("metadata", {})}
    if assistant_config.get("run_name"):
        merged["run_name"] = assistant_config["run_name"]
    return merged
