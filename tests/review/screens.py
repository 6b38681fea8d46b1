"""Screenshots of a page at a phone's and a laptop's width, for a person to look at.

They land in test-artifacts/, or in $HITL_SHOTS_DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.review import test_browser as base

WIDTHS = {390: 844, 1366: 900}


def shots(page, name: str) -> None:
    """Save the page at 390 and 1366 px wide (`name-390.png`, `name-1366.png`)."""
    folder = Path(os.environ.get("HITL_SHOTS_DIR") or base.ARTIFACTS)
    folder.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    for width, height in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size(before)
