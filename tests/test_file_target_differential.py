"""The ``file:`` target on N-Triples strings writes what the rdflib-backed one wrote (issue #14).

The rdflib-backed target is kept in :mod:`tests.legacy_file_target` as the oracle. Both apply
the same generated logs (blank nodes, literals with language tags, datatypes and escapes,
named graphs, prefix rows, aborted units, rows outside transactions), in two runs so the
second reads back the files the first wrote; the data files must be byte-identical and the
sidecars identical but for their timestamps. Prefix rows are generated in committed units
only: there the two agree, while a rolled-back prefix row that had moved an IRI away from
another name is where the old target was wrong (see
``test_rollback_restores_a_prefix_moved_away``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchsync.apply.targets.file import FileTarget
from patchsync.errors import PatchsyncError

from .apply_helpers import apply_text, iri, state
from .legacy_file_target import LegacyFileTarget

XSD = "http://www.w3.org/2001/XMLSchema#"
SUBJECTS = [iri("s1"), iri("s2"), "_:b1", "_:b2", iri("caf\u00e9")]
PREDICATES = [iri("p"), iri("q")]
OBJECTS = [
    iri("o"),
    "_:b1",
    '"plain"',
    '"hello"@en',
    '"Hallo"@de-CH',
    f'"01"^^<{XSD}integer>',
    f'"x"^^<{XSD}string>',
    '"quote \\" and \\\\ and \\n"',
    '"\u00e9t\u00e9 \\u00e9"',
    '""',
]
GRAPHS = ["", iri("g1"), "_:g2"]
# rdflib binds ~30 prefixes of its own (owl, rdf, schema, ...); these names and IRIs are none of them.
PREFIX_NAMES = ["a", "b", "ex1"]
PREFIX_IRIS = ["<http://example.org/ns1#>", "<http://example.org/ns2/>", "<urn:x:>"]


@st.composite
def logs(draw: Any, graphs: bool) -> tuple[str, int]:
    """An RDF Patch text and the index of a ``Z`` row to stop the first run at."""
    rows: list[str] = []
    patches = draw(st.integers(1, 5))
    cut = draw(st.integers(0, patches))
    cut_at = 0
    for n in range(patches):
        rows.append(f"H id <urn:p:{n}> .")
        if n:
            rows.append(f"H prev <urn:p:{n - 1}> .")
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["commit", "commit", "abort", "implicit"]))
            unit: list[str] = []
            for _ in range(draw(st.integers(0, 8))):
                op = draw(st.sampled_from("AAD"))
                s, p, o = (
                    draw(st.sampled_from(SUBJECTS)),
                    draw(st.sampled_from(PREDICATES)),
                    draw(st.sampled_from(OBJECTS)),
                )
                g = draw(st.sampled_from(GRAPHS)) if graphs else ""
                unit.append(f"{op} {s} {p} {o} {g} ." if g else f"{op} {s} {p} {o} .")
            if kind != "abort":
                for _ in range(draw(st.integers(0, 2))):
                    name = draw(st.sampled_from(PREFIX_NAMES))
                    if draw(st.booleans()):
                        unit.append(f"PA {name} {draw(st.sampled_from(PREFIX_IRIS))} .")
                    else:
                        unit.append(f"PD {name} .")
            if kind == "implicit":
                rows += unit
            else:
                rows += ["TX .", *unit, "TC ." if kind == "commit" else "TA ."]
        rows.append("Z .")
        if n + 1 == cut:
            cut_at = len(rows)
    return "\n".join(rows) + "\n", cut_at


def _sidecar(path: Path) -> dict[str, Any]:
    side: dict[str, Any] = json.loads(path.with_name(path.name + ".patchsync.json").read_text(encoding="utf-8"))
    for cp in side["checkpoints"].values():
        cp.pop("updated_at")
    for record in side["history"]:
        record.pop("applied_at")
    return side


def _run(cls: Any, path: Path, text: str, fmt: str, source: str = "log") -> str | None:
    """Apply ``text`` to a ``cls`` target at ``path``; the error class's name if it fails."""
    target = cls(path)
    try:
        apply_text(text, target, fmt=fmt, source=source)
    except PatchsyncError as exc:
        return type(exc).__name__
    finally:
        target.close()
    return None


def _pair(folder: Path, suffix: str) -> tuple[Path, Path]:
    """Paths of the same name in two folders (the sidecar names its file)."""
    (folder / "new").mkdir()
    (folder / "old").mkdir()
    return folder / "new" / f"state{suffix}", folder / "old" / f"state{suffix}"


def _same_files(new: Path, old: Path) -> None:
    assert new.exists() == old.exists()
    if old.exists():
        assert new.read_bytes() == old.read_bytes()
        assert _sidecar(new) == _sidecar(old)


@pytest.mark.parametrize("suffix", [".nq", ".trig", ".nt", ".ttl"])
@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_the_rdflib_backed_target(suffix: str, fmt: str, data: Any) -> None:
    text, cut_at = data.draw(logs(graphs=suffix in (".nq", ".trig")))
    first = "".join(line + "\n" for line in text.splitlines()[:cut_at])
    with tempfile.TemporaryDirectory() as tmp:
        new, old = _pair(Path(tmp), suffix)
        # The first run stops at a patch end. The second reads the files back and applies
        # the whole log as another source: the patches applied already are skipped by id.
        for source, part in (("first", first), ("whole", text)):
            failed = _run(FileTarget, new, part, fmt, source)
            assert failed == _run(LegacyFileTarget, old, part, fmt, source)
            assert failed is None  # the logs are valid: this compares states, not errors
            _same_files(new, old)
        assert state(FileTarget(new)) == state(LegacyFileTarget(old))


FOREIGN = {
    ".ttl": (
        "@prefix ex: <http://example.org/> .\n@prefix x: <urn:x:> .\n"
        'ex:s ex:p "v"@en, _:b1, [ ex:q "anon" ] .\n_:b1 ex:p ( 1 2 ) .\nex:s ex:n "01"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
    ),
    ".trig": (
        "@prefix ex: <http://example.org/> .\n"
        'ex:s ex:p "v" .\nex:g { ex:s ex:p _:b1 . _:b1 ex:q "x"@fr . }\n_:g2 { ex:s ex:p [] . }\n'
    ),
    ".nq": '<http://example.org/s> <http://example.org/p> _:b1 <http://example.org/g> .\n_:b1 <http://example.org/p> "\\u00e9" .\n',
    ".nt": '<http://example.org/s> <http://example.org/p> _:b1 .\n_:b1 <http://example.org/p> "v"@en .\n',
}


@pytest.mark.parametrize("suffix", sorted(FOREIGN))
def test_a_foreign_file_is_written_back_as_the_rdflib_backed_target_did(tmp_path: Path, suffix: str) -> None:
    new, old = _pair(tmp_path, suffix)
    new.write_text(FOREIGN[suffix], encoding="utf-8")
    old.write_text(FOREIGN[suffix], encoding="utf-8")
    # Deleting a labelled blank node's statement must hit (the labels were kept), and a
    # prefix row moves a file prefix's IRI to another name.
    log = (
        "TX .\nD _:b1 <http://example.org/p> _:b9 .\nA _:b1 <http://example.org/p> <http://example.org/o> .\n"
        "PA y <urn:x:> .\nTC .\n"
    )
    assert _run(FileTarget, new, log, "rdfp") is None
    assert _run(LegacyFileTarget, old, log, "rdfp") is None
    _same_files(new, old)
    assert "_:b1" in new.read_text(encoding="utf-8")


def test_rollback_restores_a_prefix_moved_away(tmp_path: Path) -> None:
    # Binding b to a's IRI unbinds a (one name per IRI); the abort must bring a back.
    path = tmp_path / "state.trig"
    apply_text("PA a <urn:x:> .\n", FileTarget(path))
    target = FileTarget(path)
    apply_text("TX .\nPA b <urn:x:> .\nTA .\n", target, source="aborted")
    assert target.namespaces() == {("", "a"): "<urn:x:>"}
    apply_text("TX .\nPA b <urn:x:> .\nTC .\n", target, source="other")
    assert target.namespaces() == {("", "b"): "<urn:x:>"}


def test_status_reads_the_sidecar_only(tmp_path: Path) -> None:
    path = tmp_path / "state.nq"
    apply_text(f"A {iri('s')} {iri('p')} {iri('o')} .\n", FileTarget(path))
    # A data file that no longer parses does not stop the checkpoints from being read...
    path.write_text("not N-Quads\n", encoding="utf-8")
    target = FileTarget(path)
    assert [s.source for s in target.sources()] == ["log"]
    assert target.head() is None
    # ...and reading the data fails, every time, naming the file and line.
    for _ in range(2):
        with pytest.raises(PatchsyncError, match=rf"{path}: cannot read the target: .*line 1"):
            list(target.quads())
