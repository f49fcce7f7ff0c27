"""docs/architecture.md maps every module of the package, and only modules that exist.

Its "Every module" table has one row per file of ``patchsync/`` (``.py`` modules, the
``.pyx`` of compiled extensions and the ``.pxi`` files they include; a package by its
directory, standing for its ``__init__.py``; the generated ``_proto/`` as one row), named
by its path under ``patchsync/``. A module added, moved or removed without its row fails
here, so the map cannot drift from the code again.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "patchsync"
DOC = ROOT / "docs" / "architecture.md"
SECTION = "## Every module"
#: A row of the table: its first cell is one path in backticks, its second says what it holds.
ROW = re.compile(r"^\| `(?P<path>[^`]+)` \| (?P<holds>[^|]*\S[^|]*) \|$")


def _key(path: Path) -> str:
    rel = path.relative_to(PACKAGE).as_posix()
    return rel.removesuffix("__init__.py") or "__init__.py"


def modules() -> set[str]:
    """Every module of the package as the table names it."""
    found: set[str] = {"_proto/"}
    for pattern in ("*.py", "*.pyx", "*.pxi"):
        found.update(_key(p) for p in PACKAGE.rglob(pattern) if "_proto" not in p.relative_to(PACKAGE).parts)
    return found


def table_lines(text: str) -> list[str]:
    """The lines of the "Every module" section that are table rows (header and rule excluded)."""
    start = text.index(SECTION + "\n")
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end >= 0 else len(text)]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return lines[2:]  # the header row and its |---| rule


def rows(text: str) -> dict[str, str]:
    """Path to what it holds, for each row; a malformed or repeated row is an error."""
    found: dict[str, str] = {}
    for line in table_lines(text):
        match = ROW.match(line)
        assert match is not None, f"not a row of one path and one description: {line!r}"
        path = match["path"]
        assert path not in found, f"{path} has two rows"
        found[path] = match["holds"].strip()
    return found


def test_every_module_has_a_row() -> None:
    missing = modules() - rows(DOC.read_text()).keys()
    assert not missing, f"docs/architecture.md ({SECTION}) names no row for: {', '.join(sorted(missing))}"


def test_every_row_names_a_module_that_exists() -> None:
    stale = rows(DOC.read_text()).keys() - modules()
    assert not stale, (
        f"docs/architecture.md ({SECTION}) has rows for modules that do not exist: {', '.join(sorted(stale))}"
    )


def test_the_check_sees_a_missing_and_a_stale_row() -> None:
    # The two checks above compare the same parse; this one shows the parse catches drift.
    text = DOC.read_text()
    lines = table_lines(text)
    dropped = lines[len(lines) // 2]
    match = ROW.match(dropped)
    assert match is not None
    path = match["path"]
    stale_row = "| `no_such_module.py` | nothing |"
    edited = text.replace(dropped + "\n", stale_row + "\n", 1)
    named = rows(edited).keys()
    assert path in modules() - named
    assert named - modules() == {"no_such_module.py"}


GLOSSARY = ROOT / "docs" / "glossary.md"
#: Words every reader of the code meets; each must have its entry (``- **word**``).
SHARED_WORDS = (
    "source", "log", "segment", "stream", "topic", "door", "unit", "commit group", "checkpoint",
    "position", "snapshot", "decoder snapshot", "resume point", "base", "message", "follower",
)  # fmt: skip


def glossary_words(text: str) -> set[str]:
    """The words the glossary defines: the bold words that open each entry."""
    words: set[str] = set()
    for line in text.splitlines():
        if line.startswith("- **"):
            head = line[2:].split(": ", 1)[0]
            words.update(re.findall(r"\*\*([^*]+)\*\*", head))
    return words


def test_the_glossary_defines_the_shared_words() -> None:
    missing = set(SHARED_WORDS) - glossary_words(GLOSSARY.read_text())
    assert not missing, f"docs/glossary.md has no entry for: {', '.join(sorted(missing))}"


def test_architecture_and_index_link_the_glossary() -> None:
    for page in (DOC, ROOT / "docs" / "index.md"):
        assert "(glossary.md)" in page.read_text(), page
