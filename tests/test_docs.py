"""README.md is a front page; the reference lives in docs/, and every link between them holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 600
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code removed."""
    lines, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def headings(path: Path) -> list[tuple[int, str]]:
    """(level, anchor) of each heading, as GitHub names them (a repeat gets -1, -2...)."""
    found, seen = [], {}
    for line in _prose(path.read_text()) if path.suffix == ".md" else []:
        heading = re.match(r"^(#{1,6}) (.+)$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(2).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.append((len(heading.group(1)), f"{slug}-{count}" if count else slug))
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of a markdown file whose file or anchor does not exist."""
    broken = []
    for line in _prose(path.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{target}: no such file")
            elif anchor and anchor not in {a for _, a in headings(linked)}:
                broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


def test_the_readme_is_a_front_page_of_at_most_600_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move reference to docs/"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_and_heading_that_exist(path):
    assert not broken_links(path)


def test_a_link_to_a_missing_file_or_heading_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Two words\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#two-words) [self](#b) `[code](gone.md)` [web](https://example.com)\n"
        "[gone](gone.md) [no anchor](a.md#three)\n\n# B\n```\n[fenced](gone.md)\n```\n"
    )
    assert broken_links(page) == ["gone.md: no such file", "a.md#three: no heading #three in a.md"]


def test_the_readme_links_every_docs_page():
    linked = {Path(target.partition("#")[0]).name for target in LINK.findall(README.read_text())}
    index = (ROOT / "docs" / "README.md").read_text()
    for page in PAGES:
        if page.name != "README.md":
            assert f"]({page.name}" in index, f"docs/README.md does not list {page.name}"
    assert "README.md" in linked, "README.md does not link the docs index"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_each_docs_page_opens_with_a_title_and_lists_its_sections(path):
    lines = _prose(path.read_text())
    assert lines[0].startswith("# "), f"{path.name} does not open with a title"
    first_section = next(i for i, line in enumerate(lines) if line.startswith("## "))
    assert "Contents:" in lines[:first_section], f"{path.name} has no contents"
    contents = lines[lines.index("Contents:") : first_section]
    listed = [t for line in contents for t in LINK.findall(line)]
    sections = [f"#{anchor}" for level, anchor in headings(path) if level in (2, 3)]
    assert listed == sections, f"{path.name}: its contents do not list its sections in order"


# A markdown file named in prose or code (`DESIGN.md`, bench/README.md).
MD_NAME = re.compile(r"(?<![\w/.-])([\w/.-]*\w\.md)\b")


def missing_md_files(path: Path) -> list[str]:
    """The .md files a page names that neither its folder nor the repository root has."""
    names = set(MD_NAME.findall(path.read_text()))
    return sorted(n for n in names if not any((d / n).exists() for d in (path.parent, ROOT)))


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_markdown_file_a_page_names_is_in_the_repository(path):
    assert not missing_md_files(path)


def test_a_page_naming_a_file_the_repository_lacks_is_caught(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("See DESIGN.md and `bench/README.md`, and a.md itself.\n")
    assert missing_md_files(page) == ["DESIGN.md"]


# What the docs once said and the app does not do (each is pinned by an app test):
# a decision stays on its thread (tests/review/test_browser.py), bulk decisions can be
# undone (tests/review/test_browser_trust.py), a used e-mail link opens with 200
# (tests/integrations/email/test_email_approvals.py).
RETIRED = {
    "docs/reviewing.md": ["After a decision the next pending item opens", "no undo grace"],
    "docs/operating.md": ["a used one answers 410", "an expired or used one 410"],
}


@pytest.mark.parametrize("page", sorted(RETIRED))
def test_the_docs_do_not_repeat_what_the_app_was_shown_not_to_do(page):
    text = " ".join((ROOT / page).read_text().split())
    assert [claim for claim in RETIRED[page] if claim in text] == []


def test_the_quick_tour_walks_through_both_of_the_demos_decisions():
    from agents.graphs import demo

    tour = README.read_text().split("## Quick tour", 1)[1].split("\n## ", 1)[0]
    tour = " ".join(tour.split())
    assert "which quarter" in tour and "`send_email`" in tour and demo.RECIPIENT in tour
