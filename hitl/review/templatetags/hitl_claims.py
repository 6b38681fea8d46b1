"""Template filters for claims: who is on an item (a lapsed claim shows as none)."""

from __future__ import annotations

from django import template

from hitl.core.decisions.claims import active_claim

register = template.Library()


@register.filter
def claim_of(row):
    return active_claim(row)
