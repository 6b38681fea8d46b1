"""Runs from the request side: start, resume, cancel, dispatch (forks: hitl/core/history)."""

from hitl.core.runs.pauses import BREAKPOINT, SUPERSEDED, announce_thread, interrupts_withdraw
from hitl.core.runs.start import run_start, run_start_settled, thread_cancel

__all__ = [
    "BREAKPOINT",
    "SUPERSEDED",
    "announce_thread",
    "interrupts_withdraw",
    "run_start",
    "run_start_settled",
    "thread_cancel",
]
