"""Every section citation in the repository resolves (docs/README.md "Citing a section").

A citation names a Markdown file and one of its headings: ``docs/protocol.md "Files"``, a list
``docs/protocol.md "Files", "Commands"``, a range ``… "The study model" to "Commands"``, the
reversed ``"Files" of docs/protocol.md``, or a link ``[protocol](../docs/protocol.md), "Files"``. The
file is read from the repository root, or next to the citing file. A heading's name is its text
with the leading section number taken off (``## 8. Files`` is "Files"); the cited name must equal
a heading's name (or its whole text) exactly. Also: no citation by the old specification's section
numbers is left (``SPEC_CITATION``), and every ``docs/….md`` path named anywhere exists.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.same_on_any_database  # reads files and `git ls-files`

ROOT = Path(__file__).resolve().parent.parent
BINARY = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".ico", ".zip", ".woff", ".woff2", ".pdf", ".sqlite3")

# Between a file and its first name: a comma or "'s", then spaces or a line break (and the next
# line's comment marker); a quote right after the file name closes a string, it opens no name.
_GAP = r"(?:,|'s)?(?:[ \t]+|[ \t]*\n[ \t]*(?:#|//|\*|\{#)?[ \t]*)"
_NAME = (
    r'(?:\\?"(?P<q>[^"\n]{1,120}?(?:\n[ \t]*(?:#|//|\*)?[ \t]*[^"\n]{1,120}?)?)\\?"'  # "…", or \"…\" in a string
    r"|“(?P<c>[^”\n]{1,120})”|(?<![*\w])\*(?P<i>[A-Za-z][^*\n]{0,80})\*(?!\*))"
)
_FILE = r"(?:\[[^\]\n]*\]\((?P<link>[^)\s]+?\.md)\)|`?(?P<file>(?:[\w.-]+/)*[\w.-]+\.md)`?)"
FORWARD = re.compile(_FILE + _GAP + _NAME)
REVERSED = re.compile(_NAME + r" (?:of|in) " + _FILE)
MORE = re.compile(r'(?:,[ \t]*(?:\n[ \t]*(?:#|//|\*)?[ \t]*)?| to | and )\\?"(?P<q>[^"\n]{1,120}?)\\?"')
SPEC_CITATION = re.compile(r"SPEC\s*§\s*\d")
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]+\.md\b")


@functools.cache
def tracked_files() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True)
    # This file's own examples (the pattern tests below) are not citations.
    return tuple(p for p in out.stdout.split("\0") if p and not p.endswith(BINARY) and p != "tests/test_doc_citations.py")


@functools.cache
def text_of(path: str) -> str:
    try:
        return (ROOT / path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return ""


@functools.cache
def heading_names(path: Path) -> frozenset[str]:
    """Each Markdown heading's whole text and its name without the leading section number."""
    names: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", line)
        if m:
            names.add(m.group(1))
            names.add(re.sub(r"^\d+(?:\.\d+)*\.?\s+", "", m.group(1)))
    return frozenset(names)


def clean(name: str) -> str:
    """A cited name as written in the heading: line breaks and comment markers as one space."""
    return " ".join(re.sub(r"\n[ \t]*(?:#|//|\*)?", " ", name).replace("\\'", "'").split())


def resolve(citing: str, cited: str) -> Path | None:
    cited = cited.split("#", 1)[0]
    for base in (ROOT, (ROOT / citing).parent):
        candidate = (base / cited).resolve()
        if candidate.is_file():
            return candidate
    return None


def scan(text: str) -> list[tuple[int, str, str]]:
    """(line, cited file, cited name) of every citation in ``text``."""
    found = []
    for rx in (FORWARD, REVERSED):
        for m in rx.finditer(text):
            cited = m.group("link") or m.group("file")
            line = text.count("\n", 0, m.start()) + 1
            found.append((line, cited, clean(m.group("q") or m.group("c") or m.group("i"))))
            pos = m.end()
            while rx is FORWARD and m.group("q") and (more := MORE.match(text, pos)):
                found.append((line, cited, clean(more.group("q"))))
                pos = more.end()
    return found


def citations() -> list[tuple[str, int, str, str]]:
    """(citing file, line, cited file, cited name) of every citation in the tracked files."""
    return [
        (path, line, cited, name)
        for path in tracked_files()
        if ".md" in text_of(path)
        for line, cited, name in scan(text_of(path))
    ]


def test_the_repository_has_section_citations() -> None:
    """The scan finds the protocol's citations at all (a broken pattern would pass everything)."""
    cited = {(f, n) for _, _, f, n in citations()}
    assert ("docs/protocol.md", "Files") in cited
    assert ("docs/protocol.md", "Adaptive allocation and stopping") in cited


def test_every_section_citation_resolves_to_a_heading() -> None:
    broken = []
    for path, line, cited, name in citations():
        target = resolve(path, cited)
        if target is None:
            broken.append(f"{path}:{line}: {cited} does not exist (cited with {name!r})")
        elif name not in heading_names(target):
            broken.append(f"{path}:{line}: {cited} has no heading {name!r}")
    assert not broken, "broken section citations:\n" + "\n".join(broken)


def matches(rx: re.Pattern[str]) -> list[tuple[str, int, re.Match[str]]]:
    """(file, line, match) of ``rx`` in every tracked file."""
    return [
        (path, text_of(path).count("\n", 0, m.start()) + 1, m)
        for path in tracked_files()
        for m in rx.finditer(text_of(path))
    ]


def test_no_spec_section_number_is_cited() -> None:
    left = [f"{path}:{line}: {m.group(0)!r}" for path, line, m in matches(SPEC_CITATION)]
    assert not left, "cite docs/protocol.md by section name instead:\n" + "\n".join(left)


def test_every_docs_path_named_exists() -> None:
    missing = [f"{path}:{line}: {m.group(0)}" for path, line, m in matches(DOCS_PATH) if not (ROOT / m.group(0)).is_file()]
    assert not missing, "paths to files that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('see docs/protocol.md "Files".', [("docs/protocol.md", "Files")]),
        ('docs/protocol.md "The study model", "Files"', [("docs/protocol.md", "The study model"),
                                                         ("docs/protocol.md", "Files")]),
        ('(docs/deploy.md, "PgBouncer")', [("docs/deploy.md", "PgBouncer")]),
        ('*Backups* in `SECURITY.md`', [("SECURITY.md", "Backups")]),
        ("[protocol](protocol.md), \"Files\"", [("protocol.md", "Files")]),
        ('open("README.md", "r")', []),
    ],
)
def test_the_citation_patterns(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(cited, name) for _, cited, name in scan(text)] == expected
