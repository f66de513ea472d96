"""Every reference to the docs resolves: the links of README.md and docs/, and the
``docs/<page>.md#<section>`` references in the code, name a file that exists and, with a
``#section``, a heading of it (as GitHub makes anchors of headings)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target), not inside inline code; a target has no spaces.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
CODE_REFERENCE = re.compile(r"\b((?:docs/[\w./-]+|README)\.md)#([\w-]+)")
# A path of the project's own in a page, a comment or a message: a folder of the tree,
# then a file name with one of the extensions the tree has (not a longer name: `.new`).
FOLDERS = (
    "bench|bridge|conf|contract|docs|jobs|lake|local_stack|ops|producer|scripts|telemetry|tests"
    "|topics"
)
PROJECT_PATH = re.compile(
    rf"(?<![\w./-])((?:{FOLDERS})/[\w/.-]+\.(?:py|toml|ya?ml|json|md|properties|sh))(?![\w.-])"
)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def anchors(page: Path) -> set[str]:
    """Every anchor a link may name on ``page``, repeated headings numbered as GitHub does."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose_lines(page):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            found.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return found


def broken(target: str, source: Path) -> str | None:
    """Why the link ``target`` written in ``source`` does not resolve, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: and the like
        return None
    path_part, _, fragment = target.partition("#")
    page = (source.parent / path_part).resolve() if path_part else source
    if not page.exists():
        return f"no file {path_part}"
    if fragment and page.suffix == ".md" and fragment not in anchors(page):
        shown = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        return f"no section #{fragment} in {shown}"
    return None


def test_slugs_follow_github() -> None:
    """The anchors GitHub gives the kinds of heading the docs have."""
    assert slug("Memory at 5,000 readings/s (issue 71)") == "memory-at-5000-readingss-issue-71"
    assert slug("The `alerts` table: one row per alert") == "the-alerts-table-one-row-per-alert"
    assert slug("Running for weeks") == "running-for-weeks"
    assert slug("[Runbook](runbooks.md): a stalled job") == "runbook-a-stalled-job"


def test_a_broken_link_is_told_apart(tmp_path: Path) -> None:
    """The check finds a missing file and a missing section, and accepts what exists."""
    (tmp_path / "a.md").write_text("# Top\n\n## Setting up\n\n```\n# not a heading\n```\n## Top\n")
    source = tmp_path / "b.md"
    assert broken("a.md#setting-up", source) is None
    assert broken("a.md#top-1", source) is None
    assert broken("a.md#not-a-heading", source).startswith("no section #not-a-heading in ")
    assert broken("c.md", source) == "no file c.md"
    assert broken("https://example.com/x.md#y", source) is None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_of_the_docs_resolves(page: Path) -> None:
    """Each relative link of a page names a file that exists, and a section it has."""
    problems = [
        f"{page.relative_to(ROOT)}:{number}: ({target}) {why}"
        for number, line in prose_lines(page)
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line))
        if (why := broken(target, page))
    ]
    assert not problems, "\n".join(problems)


def table_cells(line: str) -> int:
    """How many cells GitHub makes of a table row: it splits at every ``|`` not escaped as
    ``\\|``, inside inline code too."""
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def test_every_table_row_has_as_many_cells_as_its_header() -> None:
    """A ``|`` left unescaped in a cell cuts the row: GitHub drops what follows it."""
    problems = []
    for page in PAGES:
        header = None
        for number, line in prose_lines(page):
            if not line.lstrip().startswith("|"):
                header = None
            elif header is None:
                header = table_cells(line)
            elif table_cells(line) != header:
                problems.append(
                    f"{page.relative_to(ROOT)}:{number}: {table_cells(line)} cells, "
                    f"the header has {header} (escape a | inside a cell as \\|)"
                )
    assert table_cells("| a `x | y` | b |") == 3 and table_cells("| a \\| b | c |") == 2
    assert not problems, "\n".join(problems)


def tracked_text() -> list[tuple[str, str]]:
    """Each text file git tracks, by its path, with its content."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    files = []
    for name in filter(None, names):
        try:
            files.append((name, (ROOT / name).read_text(encoding="utf-8")))
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # images and archives; a file deleted but not yet committed
    return files


def test_every_docs_section_the_code_names_exists() -> None:
    """``docs/<page>.md#<section>`` in a comment, docstring or message names a real section."""
    problems = []
    for name, text in tracked_text():
        if name.endswith(".md"):
            continue  # the pages' links are checked above
        for number, line in enumerate(text.splitlines(), 1):
            for page, fragment in CODE_REFERENCE.findall(line):
                if why := broken(f"{page}#{fragment}", ROOT / "README.md"):
                    problems.append(f"{name}:{number}: {why}")
    assert not problems, "\n".join(problems)


def test_every_file_of_the_project_the_tree_names_exists() -> None:
    """A path such as jobs/queries/windows.py, written in a page, a comment or a message,
    names a file the tree has: a module moved or removed leaves no reference behind."""
    problems = [
        f"{name}:{number}: {path}"
        for name, text in tracked_text()
        for number, line in enumerate(text.splitlines(), 1)
        for path in PROJECT_PATH.findall(line)
        if not (ROOT / path).exists()
    ]
    assert not problems, "\n".join(problems)
