"""``patchsync diff OLD NEW`` then ``patchsync apply`` to a copy of OLD gives exactly NEW.

docs/design.md §1, "blank node labels": blank node labels are system identifiers (RDF Patch
semantics), so ``_:b1`` in a patch means the node written ``_:b1`` in the data it applies
to. Both commands must therefore read N-Quads, N-Triples, TriG and Turtle keeping the
labels as written, and the ``file:`` target must write them back. The result is compared
with NEW by label, not only up to isomorphism. Everything runs through real
``python -m patchsync`` subprocesses, as the issue's user did.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.logs.rdf_labels import read_labelled

EX = "http://example.org/"
# A blank node written without a label: patchsync numbers it by document order (anon1).
UNLABELLED = f'[ <{EX}p> "unlabelled" ] <{EX}q> <{EX}o> .'


def _statements(n: int, quads: bool) -> list[tuple[str, str, str, str]]:
    """``n`` statements with blank nodes as subject, object and (quads) graph name."""
    out = []
    for i in range(n):
        s = f"_:s{i % 37}" if i % 2 else f"<{EX}s{i % 41}>"
        o = (f"_:o{i % 29}", f'"v{i}"', f"<{EX}o{i}>")[i % 3]
        g = ("", f"_:g{i % 5}", f"<{EX}g{i % 3}>")[i % 3] if quads else ""
        out.append((s, f"<{EX}p{i % 7}>", o, g))
    return out


def _old_new(quads: bool) -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str, str]]]:
    base = _statements(300, quads)
    old = base
    # The issue's edit: every fifth statement dropped, new ones added (also on blank nodes).
    new = [q for i, q in enumerate(base) if i % 5 != 4]
    new += [(f"_:s{i}", f"<{EX}added>", f"_:n{i}", ("", f"_:g{i % 5}")[i % 2] if quads else "") for i in range(40)]
    return old, new


def _write(path: Path, statements: list[tuple[str, str, str, str]]) -> None:
    suffix = path.suffix
    lines = []
    if suffix in (".ttl", ".trig"):
        lines.append(UNLABELLED)
    if suffix == ".trig":
        by_graph: dict[str, list[str]] = {}
        for s, p, o, g in statements:
            by_graph.setdefault(g, []).append(f"{s} {p} {o} .")
        lines += by_graph.pop("", [])
        for g, triples in by_graph.items():
            lines += [f"{g} {{", *triples, "}"]
    else:
        lines += [f"{s} {p} {o} {g} ." if g else f"{s} {p} {o} ." for s, p, o, g in statements]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _expected(path: Path, statements: list[tuple[str, str, str, str]]) -> set[tuple[str, ...]]:
    out = {(s, p, o, g) for s, p, o, g in statements}
    if path.suffix in (".ttl", ".trig"):
        out.add(("_:anon1", f"<{EX}p>", '"unlabelled"', ""))
        out.add(("_:anon1", f"<{EX}q>", f"<{EX}o>", ""))
    return out


def _by_label(path: Path) -> set[tuple[str, ...]]:
    return {
        (s.n3(), p.n3(), o.n3(), "" if g is None else g.n3())  # labels as written, not up to isomorphism
        for s, p, o, g in read_labelled(path).quads
    }


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("suffix", [".nq", ".nt", ".trig", ".ttl"])
def test_diff_then_apply_to_a_copy_of_old_gives_new(tmp_path: Path, suffix: str) -> None:
    old_rows, new_rows = _old_new(quads=suffix in (".nq", ".trig"))
    old, new, copy = tmp_path / f"old{suffix}", tmp_path / f"new{suffix}", tmp_path / f"copy{suffix}"
    _write(old, old_rows)
    _write(new, new_rows)
    shutil.copy(old, copy)
    patch = tmp_path / "d.jellyp"

    done = _cli("diff", str(old), str(new), "-o", str(patch))
    assert done.returncode == 0, done.stderr
    done = _cli("apply", str(patch), "--target", f"file:{copy}")
    assert done.returncode == 0, done.stderr

    result = _by_label(copy)
    expected = _expected(new, new_rows)
    assert not expected - result, f"missing {sorted(expected - result)[:5]}"
    assert not result - expected, f"extra {sorted(result - expected)[:5]}"
    assert _by_label(new) == expected  # the reader itself keeps NEW's labels


def test_a_label_that_cannot_be_kept_is_refused_in_one_line(tmp_path: Path) -> None:
    old = tmp_path / "old.ttl"
    # anon1 is also the label the unlabelled node would get: one of them cannot be kept.
    old.write_text(f"_:anon1 <{EX}p> <{EX}o> .\n{UNLABELLED}\n", encoding="utf-8")
    new = tmp_path / "new.ttl"
    new.write_text(f"<{EX}s> <{EX}p> <{EX}o> .\n", encoding="utf-8")
    done = _cli("diff", str(old), str(new), "-o", str(tmp_path / "d.jellyp"))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(old) in lines[0] and "_:anon1" in lines[0], done.stderr
    assert not (tmp_path / "d.jellyp").exists()
