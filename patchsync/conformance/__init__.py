"""Jelly conformance suites: the manifest runner and the runners of each test class.

``runner`` reads manifests and records results; ``patch`` checks Jelly-Patch cases and
``rdf`` Jelly-RDF cases. :data:`RUNNERS` is the table that joins them. ``coverage`` reports
a run rule by rule (for suites whose cases name the rules they cover).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from patchsync.conformance.coverage import (
    Coverage,
    RuleCoverage,
    SpecRule,
    find_rules_files,
    format_coverage,
    load_rules,
    rule_coverage,
)
from patchsync.conformance.patch import run_patch_from_jelly, run_patch_to_jelly
from patchsync.conformance.rdf import run_rdf_from_jelly, run_rdf_to_jelly
from patchsync.conformance.runner import (
    JELLYT,
    MF,
    CaseFailed,
    CaseResult,
    CaseSkipped,
    ConformanceReport,
    Runner,
    Status,
    TestCase,
)
from patchsync.conformance.runner import run_manifests as _run_with

__all__ = [
    "JELLYT",
    "MF",
    "RUNNERS",
    "CaseFailed",
    "CaseResult",
    "CaseSkipped",
    "ConformanceReport",
    "Coverage",
    "RuleCoverage",
    "Runner",
    "SpecRule",
    "Status",
    "TestCase",
    "find_rules_files",
    "format_coverage",
    "load_rules",
    "rule_coverage",
    "run_manifests",
]

#: Runners by test class IRI.
RUNNERS: dict[str, Runner] = {
    str(JELLYT.TestPatchFromJelly): run_patch_from_jelly,
    str(JELLYT.TestPatchToJelly): run_patch_to_jelly,
    str(JELLYT.TestRdfFromJelly): run_rdf_from_jelly,
    str(JELLYT.TestRdfToJelly): run_rdf_to_jelly,
}


def run_manifests(paths: Sequence[str | Path], *, runners: Mapping[str, Runner] | None = None) -> ConformanceReport:
    """Run every case of the manifests at ``paths`` (see :func:`runner.run_manifests`).

    ``runners`` defaults to :data:`RUNNERS`.
    """
    return _run_with(paths, runners=RUNNERS if runners is None else runners)
