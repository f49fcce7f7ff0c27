"""Per-rule coverage of the Jelly-Patch conformance suite (conformance/patch): the rule tags
of the manifests, rules.ttl, the README's coverage table and ``patchsync conformance --coverage``.

The rules are those of the Jelly-Patch specification (``specs/jelly-patch-spec.txt``, each
rule's ``jellyt:section`` and link name its section) and the Jelly-RDF rules it inherits.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.conformance import (
    JELLYT,
    CaseResult,
    ConformanceReport,
    find_rules_files,
    format_coverage,
    load_rules,
    rule_coverage,
    run_manifests,
)
from patchsync.errors import FormatError

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "conformance" / "patch"
MANIFESTS = [SUITE / "from_jelly" / "manifest.ttl", SUITE / "to_jelly" / "manifest.ttl"]
RULES_NS = "https://w3id.org/jelly/dev/tests/patch/rules#"

#: Rule ids published with the suite. Ids are stable: others cite them, so one may be added
#: but never renamed or removed (this list only grows).
PUBLISHED_IDS = """
protobuf frame-order row-one-field row-patch-types stream-type-unspecified stream-type-frame
stream-type-flat stream-type-punctuated punctuation-only-punctuated punctuation-ends-patch
punctuation-anywhere statement-type-unspecified statement-type-triples statement-type-quads
quads-graph-set options-first-row options-repeated options-generalized options-rdf-star
options-unused-feature options-name-table-min options-lookup-size options-prefix-lookup-off
options-datatype-lookup-off options-version repeat-after-repeat repeat-not-first-row
repeat-across-frames repeat-not-in-quoted repeat-any-operation repeat-graph repeat-namespace-graph
namespace-fields namespace-graph namespace-value-first tx-end-after-start tx-start-after-end
tx-several-per-frame tx-within-patch tx-frame tx-flat tx-punctuated tx-optional
rdf-patch-rules-not-enforced header-value header-no-repeat header-triple-term terms-in-row-order
delimited delimited-files security-lookup-sizes security-nesting lookup-entry-ids lookup-replace
lookup-defined-before-use iri-prefix-id-zero iri-name-id-zero iri-order iri-concatenation
literal-simple literal-datatype-entry bnode-label quoted-triples utf8 backward-compatibility
options-version-lower namespace-name-pn-prefix
""".split()  # noqa: SIM905 - one id per word reads better than 67 quoted strings


@pytest.fixture(scope="module")
def report() -> ConformanceReport:
    return run_manifests(MANIFESTS)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], cwd=cwd, capture_output=True, text=True)


def test_rules_file_lists_every_published_id_once_with_text_and_section() -> None:
    (found,) = find_rules_files(MANIFESTS)
    assert found.resolve() == (SUITE / "rules.ttl").resolve()
    rules = load_rules(found)
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids))
    assert set(PUBLISHED_IDS) <= set(ids)
    for rule in rules:
        assert rule.iri == RULES_NS + rule.id
        assert rule.text and rule.section.startswith(("Jelly-Patch: ", "Jelly-RDF: "))
        assert rule.url.startswith(
            (
                "https://w3id.org/jelly/dev/specification/patch/#",
                "https://w3id.org/jelly/dev/specification/serialization/#",
            )
        )


def test_every_case_covers_listed_rules_and_the_suite_passes_rule_by_rule(report: ConformanceReport) -> None:
    rules = load_rules(SUITE / "rules.ttl")
    coverage = rule_coverage(report, rules)
    assert not coverage.untagged
    assert all(entry.listed for entry in coverage.rules), [e.rule.id for e in coverage.rules if not e.listed]
    assert [e.rule.id for e in coverage.rules] == [r.id for r in rules]
    assert not coverage.failing
    # Every case is counted once per rule it names.
    assert sum(len(e.cases) for e in coverage.rules) == sum(len(r.rules) for r in report.results)
    covered = {e.rule.id for e in coverage.rules if e.cases}
    # Spot checks against the specification: the FRAME, FLAT and PUNCTUATED stream types
    # (Jelly-Patch, "Patch stream types") and the transaction rules each have cases.
    assert {"stream-type-frame", "stream-type-flat", "stream-type-punctuated", "tx-frame", "tx-punctuated"} <= covered


def _readme_table() -> dict[str, tuple[str, str, int]]:
    """rule id -> (from_jelly "pos / neg", to_jelly "pos / neg", number of cases listed)."""
    rows: dict[str, tuple[str, str, int]] = {}
    for line in (SUITE / "README.md").read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"\| `([a-z0-9-]+)` \| \[[^]]*\]\([^)]*\) \| (\d+ / \d+) \| (\d+ / \d+) \| (.*) \|", line)
        if m:
            cases = 0 if m.group(4) == "none" else m.group(4).count("`") // 2
            rows[m.group(1)] = (m.group(2), m.group(3), cases)
    return rows


def test_readme_coverage_table_agrees_with_the_manifests(report: ConformanceReport) -> None:
    """The generator writes the table from its own case list; the runner reads the
    manifests: two independent counts of the same tags."""
    table = _readme_table()
    coverage = rule_coverage(report, load_rules(SUITE / "rules.ttl"))
    assert set(table) == {e.rule.id for e in coverage.rules}
    for entry in coverage.rules:

        def counts(direction: str, cases: list[CaseResult] = entry.cases) -> str:
            chosen = [c for c in cases if c.manifest.parent.name == direction]
            pos = sum(1 for c in chosen if c.short_id.split("/")[-1].startswith("pos"))
            return f"{pos} / {len(chosen) - pos}"

        assert table[entry.rule.id] == (counts("from_jelly"), counts("to_jelly"), len(entry.cases)), entry.rule.id


def test_cli_coverage_table_and_summary() -> None:
    done = _cli("conformance", *map(str, MANIFESTS), "--coverage")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].endswith("passed, 0 failed")
    assert lines[0].split() == ["rule", "cases", "passed", "failed", "skipped", "section"]
    frame = next(line for line in lines if line.startswith("stream-type-frame "))
    assert frame.split()[1:4] == [str(_readme_table()["stream-type-frame"][2])] * 2 + ["0"]
    assert "Jelly-Patch: Patch stream types" in frame
    uncovered = next(line for line in lines if line.startswith("options-version-lower "))
    assert uncovered.split()[1:5] == ["0", "-", "-", "-"]
    summary = next(line for line in lines if " rules: " in line)
    assert "options-version-lower" in summary and "0 with a failed case" in summary


def test_cli_coverage_names_the_rule_of_a_failing_case(tmp_path: Path) -> None:
    suite = tmp_path / "patch"
    shutil.copytree(SUITE, suite)
    # from_jelly/flat/pos_001 covers stream-type-flat (Jelly-Patch, "Patch stream types").
    out = suite / "from_jelly" / "flat" / "pos_001" / "out_000.rdfp"
    out.write_text(out.read_text(encoding="utf-8").replace("example.org/o", "example.org/X", 1), encoding="utf-8")
    done = _cli("conformance", str(suite / "from_jelly" / "manifest.ttl"), "--coverage")
    assert done.returncode != 0
    flat = next(line for line in done.stdout.splitlines() if line.startswith("stream-type-flat "))
    cases, passed, failed = (int(v) for v in flat.split()[1:4])
    assert failed == 1 and passed == cases - 1
    assert "1 with a failed case (stream-type-flat)" in done.stdout
    assert "FAILED  https://w3id.org/jelly/dev/tests/patch/from_jelly/flat/pos_001:" in done.stdout


MANIFEST = """\
PREFIX jellyt: <https://w3id.org/jelly/dev/tests/vocab#>
PREFIX mf:     <http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#>
PREFIX rule:   <https://example.org/rules#>

<manifest> a mf:Manifest ;
    mf:entries ( <a> <b> <c> ) .

<a> a jellyt:TestNegative, jellyt:TestPatchFromJelly ; mf:name "a" ; mf:action <a.jellyp> ;
    jellyt:coversRule rule:one, rule:elsewhere .
<b> a jellyt:TestNegative, jellyt:TestPatchFromJelly ; mf:name "b" ; mf:action <b.jellyp> ;
    jellyt:coversRule rule:one .
<c> a jellyt:TestNegative, jellyt:TestPatchFromJelly ; mf:name "c" ; mf:action <c.jellyp> .
"""

RULES = """\
PREFIX jellyt: <https://w3id.org/jelly/dev/tests/vocab#>
PREFIX rdfs:   <http://www.w3.org/2000/01/rdf-schema#>
PREFIX rule:   <https://example.org/rules#>

<https://example.org/rules> a jellyt:RuleSet ; jellyt:rules ( rule:two rule:one ) .
rule:one a jellyt:SpecRule ; rdfs:label "one" ; jellyt:section "S: one" .
rule:two a jellyt:SpecRule ; rdfs:label "two" ; jellyt:section "S: two" .
"""


def test_coverage_lists_uncovered_unlisted_rules_and_untagged_cases(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "dir").mkdir(parents=True)
    (suite / "dir" / "manifest.ttl").write_text(MANIFEST)
    for name in ("a", "b", "c"):  # negative cases: bytes that are no Jelly-Patch stream
        (suite / "dir" / f"{name}.jellyp").write_bytes(b"\xff\xff")
    (suite / "rules.ttl").write_text(RULES)
    report = run_manifests([suite / "dir" / "manifest.ttl"])
    assert report.passed == 3
    rules = load_rules(find_rules_files([suite / "dir" / "manifest.ttl"])[0])
    coverage = rule_coverage(report, rules)
    assert [(e.rule.id, len(e.cases), e.listed) for e in coverage.rules] == [
        ("two", 0, True),
        ("one", 2, True),
        ("elsewhere", 1, False),
    ]
    assert [c.short_id for c in coverage.untagged] == ["c"]
    assert [r.id for r in coverage.uncovered] == ["two"]
    text = format_coverage(coverage)
    assert "elsewhere" in text and "(not in a rules file)" in text
    assert "3 rules: 2 covered, 1 with no case (two); 0 with a failed case" in text
    assert text.endswith("1 cases name no rule")
    assert str(JELLYT.coversRule) == "https://w3id.org/jelly/dev/tests/vocab#coversRule"


def test_a_bad_rules_file_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "rules.ttl"
    bad.write_text("this is not turtle")
    with pytest.raises(FormatError, match="not valid Turtle"):
        load_rules(bad)
    done = _cli("conformance", str(MANIFESTS[0]), "--coverage", "--rules", str(bad))
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "rules.ttl" in done.stderr and "Traceback" not in done.stderr
