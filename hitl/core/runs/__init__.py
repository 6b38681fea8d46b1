"""Runs from the request side: start, resume, cancel, dispatch, fork."""

from hitl.core.runs.start import run_start, thread_cancel

__all__ = ["run_start", "thread_cancel"]
