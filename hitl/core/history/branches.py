"""A thread's branches: its original line of runs, and one more for each fork.

A fork (timetravel.thread_fork) starts a run from an earlier step; that run and the
runs after it (resumes, run-again) make a new branch, which becomes the thread's
current one. Results, files and history steps say which branch they belong to, so an
older branch's result is never read as what the running fork produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hitl.core.models import Run, Thread


@dataclass(frozen=True)
class Branch:
    number: int  # 0 for the original branch, n for the n-th fork
    label: str  # "original branch", "fork 1, from step 12"
    short: str  # "original", "fork 1"
    first_run_id: str


@dataclass
class Branches:
    all: list[Branch] = field(default_factory=list)
    by_run: dict[str, Branch] = field(default_factory=dict)
    # (created_at, branch) of every run, oldest first: what ran when
    timeline: list[tuple[datetime, Branch]] = field(default_factory=list)

    @property
    def many(self) -> bool:
        return len(self.all) > 1

    @property
    def current(self) -> Branch | None:
        return self.timeline[-1][1] if self.timeline else None

    def of_run(self, run_id: Any) -> Branch | None:
        return self.by_run.get(str(run_id)) if run_id else None

    def at(self, when: datetime) -> Branch | None:
        """The branch whose run was the latest to start at `when`."""
        found = None
        for created_at, branch in self.timeline:
            if created_at > when:
                break
            found = branch
        return found


def thread_branches(thread: Thread) -> Branches:
    """Every run of the thread assigned to its branch (one query)."""
    out = Branches()
    branch: Branch | None = None
    rows = Run.objects.filter(thread=thread).order_by("created_at", "id")
    for pk, created_at, metadata in rows.values_list("pk", "created_at", "metadata"):
        metadata = metadata if isinstance(metadata, dict) else {}
        if branch is None or metadata.get("forked_from"):
            number = len(out.all)
            step = metadata.get("forked_step")
            if number == 0:
                label, short = "original branch", "original"
            else:
                short = f"fork {number}"
                label = f"{short}, from step {step}" if isinstance(step, int) else short
            branch = Branch(number=number, label=label, short=short, first_run_id=str(pk))
            out.all.append(branch)
        out.by_run[str(pk)] = branch
        out.timeline.append((created_at, branch))
    return out
