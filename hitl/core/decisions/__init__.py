"""Decisions: one function records every answer; quorum, rules, claims, bulk, undo."""

from hitl.core.decisions.answer import (
    interrupt_answer_check,
    interrupt_release,
    interrupt_release_due,
    interrupt_resolve,
    interrupt_rows_for_update,
    interrupt_undo,
)

__all__ = [
    "interrupt_answer_check",
    "interrupt_release",
    "interrupt_release_due",
    "interrupt_resolve",
    "interrupt_rows_for_update",
    "interrupt_undo",
]
