"""The process-wide graph registry built from settings.HITL_GRAPHS."""

from django.conf import settings

from agents.registry import GraphRegistry

registry = GraphRegistry(settings.HITL_GRAPHS)
