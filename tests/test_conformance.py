"""The conformance runner and the Jelly-Patch conformance suite in conformance/patch."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from patchsync.conformance import (
    JELLYT,
    RUNNERS,
    CaseResult,
    CaseSkipped,
    ConformanceReport,
    TestCase,
    run_manifests,
)

from .helpers import RDF_SUITE

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "conformance" / "patch"
FROM_JELLY = SUITE / "from_jelly" / "manifest.ttl"
TO_JELLY = SUITE / "to_jelly" / "manifest.ttl"
GENERATOR = ROOT / "scripts" / "gen_patch_conformance.py"

#: Cases that fail because of a known gap in the code under test. The set must match the
#: failures exactly, so a fixed gap fails this test until its entry is removed.
# Cases the code is known to fail (must match the failures exactly, so a fix is noticed).
KNOWN_GAPS: set[str] = set()

PREFIXES = """\
PREFIX jellyt: <https://w3id.org/jelly/dev/tests/vocab#>
PREFIX mf:     <http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#>
PREFIX rdfs:   <http://www.w3.org/2000/01/rdf-schema#>
"""


def _key(result: CaseResult) -> str:
    return f"{result.manifest.parent.name}:{result.short_id}"


def _case_dirs(direction: str) -> set[str]:
    base = SUITE / direction
    return {str(p.relative_to(base)) for p in base.glob("*/*") if p.is_dir()}


@pytest.fixture(scope="module")
def suite_report() -> ConformanceReport:
    return run_manifests([FROM_JELLY, TO_JELLY])


# -- the committed suite ------------------------------------------------------------------


def test_patch_suite_passes_except_known_gaps(suite_report: ConformanceReport) -> None:
    failed = {_key(r): r.message for r in suite_report.with_status("failed")}
    assert set(failed) == KNOWN_GAPS, failed
    assert suite_report.skipped == 0


def test_patch_suite_case_counts(suite_report: ConformanceReport) -> None:
    by_manifest = Counter(r.manifest.parent.name for r in suite_report.results)
    assert by_manifest["from_jelly"] >= 60
    assert by_manifest["to_jelly"] >= 20
    # Every case directory is listed in its manifest, and every listed case has one.
    for direction in ("from_jelly", "to_jelly"):
        listed = {r.short_id for r in suite_report.results if r.manifest.parent.name == direction}
        assert listed == _case_dirs(direction)
    kinds = Counter((r.manifest.parent.name, r.short_id.split("/")[1][:3]) for r in suite_report.results)
    assert kinds["from_jelly", "neg"] >= 40
    assert kinds["from_jelly", "pos"] >= 40
    assert kinds["to_jelly", "neg"] >= 5


def test_patch_suite_covers_the_groups(suite_report: ConformanceReport) -> None:
    groups = {r.short_id.split("/")[0] for r in suite_report.results if r.manifest.parent.name == "from_jelly"}
    expected = {"triples_frame", "quads_frame", "triples_punctuated", "quads_punctuated", "flat", "lookups"}
    expected |= {"repeated", "transactions", "headers", "namespaces", "rdf_star", "generalized", "options"}
    assert expected <= groups


def test_every_case_names_a_rule(suite_report: ConformanceReport) -> None:
    for result in suite_report.results:
        assert result.name, result.id
        assert result.test_class in (str(JELLYT.TestPatchFromJelly), str(JELLYT.TestPatchToJelly))


def test_generator_is_deterministic_and_the_suite_up_to_date(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for out in (first, second):
        subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], check=True, capture_output=True)
    _assert_same_tree(first, second)
    _assert_same_tree(first, SUITE)


def _assert_same_tree(a: Path, b: Path) -> None:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    assert files_a == files_b, f"run scripts/gen_patch_conformance.py: {sorted(files_a ^ files_b)[:5]}"
    stale = [str(p) for p in sorted(files_a) if not filecmp.cmp(a / p, b / p, shallow=False)]
    assert not stale, f"run scripts/gen_patch_conformance.py: {stale[:5]} differ"


# -- the runner detects failures ------------------------------------------------------------


@pytest.fixture
def suite_copy(tmp_path: Path) -> Path:
    shutil.copytree(SUITE, tmp_path / "patch")
    return tmp_path / "patch"


def test_tampered_expected_output_fails(suite_copy: Path) -> None:
    out = suite_copy / "from_jelly" / "triples_frame" / "pos_001" / "out_000.rdfp"
    out.write_text(out.read_text(encoding="utf-8").replace("o2>", "o3>"), encoding="utf-8")
    report = run_manifests([suite_copy / "from_jelly" / "manifest.ttl"])
    assert report.failed == 1
    (failed,) = report.with_status("failed")
    assert failed.short_id == "triples_frame/pos_001"
    assert "row 1" in failed.message and "o3" in failed.message


def test_missing_expected_patch_fails(suite_copy: Path) -> None:
    case = suite_copy / "from_jelly" / "triples_frame" / "pos_002"
    manifest = suite_copy / "from_jelly" / "manifest.ttl"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("        <triples_frame/pos_002/out_002.rdfp>\n", ""), encoding="utf-8")
    (case / "out_002.rdfp").unlink()
    report = run_manifests([manifest])
    (failed,) = report.with_status("failed")
    assert failed.short_id == "triples_frame/pos_002"
    assert "decoded 3 patches, expected 2" in failed.message


def test_negative_case_with_a_valid_input_fails(suite_copy: Path) -> None:
    base = suite_copy / "from_jelly"
    shutil.copyfile(base / "triples_frame" / "pos_001" / "in.jellyp", base / "options" / "neg_001" / "in.jellyp")
    report = run_manifests([base / "manifest.ttl"])
    (failed,) = report.with_status("failed")
    assert failed.short_id == "options/neg_001"
    assert "expected a DecodeError" in failed.message


def test_negative_to_jelly_case_with_an_encodable_input_fails(suite_copy: Path) -> None:
    base = suite_copy / "to_jelly"
    shutil.copyfile(base / "triples_frame" / "pos_001" / "in_000.rdfp", base / "rdf_star" / "neg_001" / "in_000.rdfp")
    report = run_manifests([base / "manifest.ttl"])
    failed = {r.short_id: r.message for r in report.with_status("failed")}
    assert "expected an EncodeError" in failed.pop("rdf_star/neg_001")
    assert {f"to_jelly:{k}" for k in failed} == KNOWN_GAPS


def test_to_jelly_checks_the_decoded_rows(suite_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken encoder that drops every delete row must be caught.
    from patchsync.codec.patch_encoder import PatchEncoder

    def no_delete(self: PatchEncoder[str], *args: object) -> None:
        return None

    monkeypatch.setattr(PatchEncoder, "delete", no_delete)
    report = run_manifests([suite_copy / "to_jelly" / "manifest.ttl"])
    messages = {r.short_id: r.message for r in report.with_status("failed")}
    assert messages["triples_frame/pos_001"].startswith("patch 0 (in_000.rdfp): 2 rows decoded, 3 expected")
    assert messages["transactions/pos_001"] == "patch 0 (in_000.rdfp), row 4: got TA ., expected D " + (
        "<http://example.org/s> <http://example.org/p> <http://example.org/o> ."
    )


# -- manifests in general -------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_jelly_rdf_cases_go_to_the_jelly_rdf_runners(tmp_path: Path) -> None:
    manifest = _write(
        tmp_path / "rdf" / "manifest.ttl",
        PREFIXES
        + """
BASE <https://w3id.org/jelly/dev/tests/rdf/from_jelly/>
<manifest> a mf:Manifest ; mf:entries ( <a/pos_001> <b/neg_001> ) .
<a/pos_001> a jellyt:TestPositive, jellyt:TestRdfFromJelly ; mf:name "p" ;
    mf:action <a/pos_001/in.jelly> ; mf:result ( <a/pos_001/out_000.nq> ) .
<b/neg_001> a jellyt:TestNegative, jellyt:TestRdfToJelly ; mf:name "n" ;
    mf:action ( <b/neg_001/stream_options.jelly> <b/neg_001/in_000.nt> ) .
""",
    )
    report = run_manifests([manifest])
    # The input files do not exist: both runners run and report it (nothing is skipped).
    assert report.counts == {"passed": 0, "failed": 2, "skipped": 0, "total": 2}
    assert all("cannot read" in r.message for r in report.results)


def test_upstream_jelly_rdf_suite_passes_case_by_case() -> None:
    report = run_manifests([RDF_SUITE / "from_jelly" / "manifest.ttl", RDF_SUITE / "to_jelly" / "manifest.ttl"])
    assert [(r.short_id, r.message) for r in report.results if r.status != "passed"] == []
    assert report.counts == {"passed": 187, "failed": 0, "skipped": 0, "total": 187}


def test_a_jelly_rdf_runner_plugs_in_by_test_class(tmp_path: Path) -> None:
    manifest = _write(
        tmp_path / "m" / "manifest.ttl",
        PREFIXES
        + """
BASE <https://example.org/suite/>
<manifest> a mf:Manifest ; mf:entries ( <x/pos_001> ) .
<x/pos_001> a jellyt:TestPositive, jellyt:TestRdfFromJelly ; mf:name "p" ;
    mf:action <x/pos_001/in.jelly> ; mf:result ( <x/pos_001/out_000.nq> <x/pos_001/out_001.nq> ) .
""",
    )
    seen: list[TestCase] = []

    def runner(case: TestCase) -> str:
        seen.append(case)
        return ""

    report = run_manifests([manifest], runners={**RUNNERS, str(JELLYT.TestRdfFromJelly): runner})
    assert report.passed == 1
    (case,) = seen
    directory = manifest.parent.resolve()
    assert case.action == [directory / "x" / "pos_001" / "in.jelly"]
    assert not case.action_is_list
    assert case.result == [directory / "x" / "pos_001" / f"out_00{i}.nq" for i in (0, 1)]
    assert case.result_is_list and case.positive
    assert case.short_id == "x/pos_001"


def test_relative_iris_without_base_resolve_against_the_manifest_file(tmp_path: Path) -> None:
    manifest = _write(
        tmp_path / "nobase" / "manifest.ttl",
        PREFIXES
        + """
<manifest> a mf:Manifest ; mf:entries ( <c/pos_001> ) .
<c/pos_001> a jellyt:TestPositive, jellyt:TestRdfFromJelly ; mf:name "p" ; mf:action <c/pos_001/in.jelly> .
""",
    )
    seen: list[TestCase] = []

    def runner(case: TestCase) -> str:
        seen.append(case)
        raise CaseSkipped("recorded")

    run_manifests([manifest], runners={str(JELLYT.TestRdfFromJelly): runner})
    assert seen[0].action == [manifest.parent.resolve() / "c" / "pos_001" / "in.jelly"]
    assert seen[0].result is None


def test_unknown_and_malformed_cases_fail_clearly(tmp_path: Path) -> None:
    manifest = _write(
        tmp_path / "odd" / "manifest.ttl",
        PREFIXES
        + """
BASE <https://example.org/odd/>
<manifest> a mf:Manifest ; mf:entries ( <u/pos_001> <b/pos_001> <n/pos_001> ) .
<u/pos_001> a jellyt:TestPositive, jellyt:TestSomethingElse ; mf:name "u" ; mf:action <u/in> .
<b/pos_001> a jellyt:TestPositive, jellyt:TestNegative, jellyt:TestPatchFromJelly ; mf:name "b" ;
    mf:action <b/in> .
<n/pos_001> a jellyt:TestPositive, jellyt:TestPatchFromJelly ; mf:name "n" .
""",
    )
    report = run_manifests([manifest])
    messages = {r.short_id: r.message for r in report.results}
    assert report.failed == 3
    assert "unknown test class https://w3id.org/jelly/dev/tests/vocab#TestSomethingElse" in messages["u/pos_001"]
    assert "exactly one of jellyt:TestPositive and jellyt:TestNegative" in messages["b/pos_001"]
    assert "no mf:action" in messages["n/pos_001"]


def test_missing_input_file_fails(tmp_path: Path) -> None:
    manifest = _write(
        tmp_path / "missing" / "manifest.ttl",
        PREFIXES
        + """
BASE <https://example.org/missing/>
<manifest> a mf:Manifest ; mf:entries ( <g/neg_001> ) .
<g/neg_001> a jellyt:TestNegative, jellyt:TestPatchFromJelly ; mf:name "g" ; mf:action <g/neg_001/in.jellyp> .
""",
    )
    (result,) = run_manifests([manifest]).results
    assert result.status == "failed"
    assert "cannot read" in result.message


def test_unreadable_manifest_is_one_failed_result(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad" / "manifest.ttl", "this is not turtle <")
    report = run_manifests([tmp_path / "absent.ttl", bad])
    assert [r.status for r in report.results] == ["failed", "failed"]
    assert "cannot read manifest" in report.results[0].message
    assert "not valid Turtle" in report.results[1].message
    assert not report.ok
