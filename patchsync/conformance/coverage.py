"""Per-rule coverage of a conformance run: which specification rules the cases cover, and
how they fared.

A suite that tags its cases with ``jellyt:coversRule`` (the Jelly-Patch suite in
``conformance/patch``) lists its rules in a ``rules.ttl`` next to the manifests (or one
directory up): a ``jellyt:RuleSet`` whose ``jellyt:rules`` is the ordered list, and per rule
an ``rdfs:label`` (its id), ``rdfs:comment`` (the rule's text), ``jellyt:section`` and
``rdfs:seeAlso`` (the section of the specification). :func:`rule_coverage` joins a
:class:`~patchsync.conformance.runner.ConformanceReport` with those rules: cases per rule,
passed / failed / skipped per rule, and the rules no case covers. :func:`format_coverage`
renders it as a text table. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rdflib import RDF, RDFS, Graph, URIRef
from rdflib.collection import Collection

from patchsync.conformance.runner import JELLYT, CaseResult, ConformanceReport
from patchsync.errors import FormatError

__all__ = [
    "RULES_FILE",
    "Coverage",
    "RuleCoverage",
    "SpecRule",
    "find_rules_files",
    "format_coverage",
    "load_rules",
    "rule_coverage",
]

#: The name of a suite's rule list, looked for next to each manifest and one directory up.
RULES_FILE = "rules.ttl"


@dataclass(frozen=True, slots=True)
class SpecRule:
    """One rule of a specification: its IRI, short id, text, section title and link."""

    iri: str
    id: str
    text: str = ""
    section: str = ""
    url: str = ""


@dataclass(slots=True)
class RuleCoverage:
    """One rule and the case results that cover it."""

    rule: SpecRule
    cases: list[CaseResult] = field(default_factory=list)
    #: Whether the rule is listed in a rules file (cases may name rules no file lists).
    listed: bool = True

    def _count(self, status: str) -> int:
        return sum(1 for c in self.cases if c.status == status)

    @property
    def passed(self) -> int:
        return self._count("passed")

    @property
    def failed(self) -> int:
        return self._count("failed")

    @property
    def skipped(self) -> int:
        return self._count("skipped")


@dataclass(slots=True)
class Coverage:
    """Coverage rule by rule (rules-file order, then rules only cases name), and the cases
    that name no rule."""

    rules: list[RuleCoverage]
    untagged: list[CaseResult]

    @property
    def uncovered(self) -> list[SpecRule]:
        """Listed rules that no case covers."""
        return [r.rule for r in self.rules if not r.cases]

    @property
    def failing(self) -> list[SpecRule]:
        """Rules with at least one failed case."""
        return [r.rule for r in self.rules if r.failed]


def _short(iri: str) -> str:
    return iri.rsplit("#", 1)[-1] if "#" in iri else iri.rstrip("/").rsplit("/", 1)[-1]


def find_rules_files(manifests: Iterable[Path]) -> list[Path]:
    """The rules files of ``manifests``: ``rules.ttl`` next to each, else one directory up."""
    found: list[Path] = []
    for manifest in manifests:
        for directory in (manifest.parent, manifest.parent.parent):
            candidate = directory / RULES_FILE
            if candidate.is_file():
                if candidate.resolve() not in (p.resolve() for p in found):
                    found.append(candidate)
                break
    return found


def load_rules(path: Path) -> list[SpecRule]:
    """The rules of a rules file, in the order of its ``jellyt:rules`` lists (rules not in
    a list follow, by IRI). Raises :class:`FormatError` for a file that cannot be read."""
    graph = Graph()
    try:
        graph.parse(data=path.read_text(encoding="utf-8"), format="turtle", publicID=path.resolve().as_uri())
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"cannot read rules file {path}: {exc}") from None
    except Exception as exc:  # rdflib raises a variety of parser errors
        raise FormatError(f"rules file {path} is not valid Turtle: {exc}".splitlines()[0]) from None
    ordered: list[URIRef] = []
    for rule_set in sorted(graph.subjects(RDF.type, JELLYT.RuleSet), key=str):
        members = graph.value(rule_set, JELLYT.rules)
        if members is not None:
            ordered.extend(m for m in Collection(graph, members) if isinstance(m, URIRef) and m not in ordered)
    rest = sorted((r for r in graph.subjects(RDF.type, JELLYT.SpecRule) if isinstance(r, URIRef)), key=str)
    ordered.extend(r for r in rest if r not in ordered)

    def text(node: URIRef, predicate: URIRef) -> str:
        value = graph.value(node, predicate)
        return "" if value is None else str(value)

    return [
        SpecRule(
            str(node),
            text(node, RDFS.label) or _short(str(node)),
            text(node, RDFS.comment),
            text(node, JELLYT.section),
            text(node, RDFS.seeAlso),
        )
        for node in ordered
    ]


def rule_coverage(report: ConformanceReport, rules: Sequence[SpecRule]) -> Coverage:
    """Join ``report`` with ``rules``: every listed rule (covered or not), then any rule a
    case names that is not listed, each with the results of the cases that cover it."""
    by_iri = {rule.iri: RuleCoverage(rule) for rule in rules}
    untagged: list[CaseResult] = []
    for result in report.results:
        if not result.rules:
            untagged.append(result)
        for iri in result.rules:
            entry = by_iri.get(iri)
            if entry is None:
                entry = by_iri[iri] = RuleCoverage(SpecRule(iri, _short(iri)), listed=False)
            entry.cases.append(result)
    return Coverage(list(by_iri.values()), untagged)


def format_coverage(coverage: Coverage) -> str:
    """A text table: per rule, cases / passed / failed / skipped and its section; then a
    summary naming the rules no case covers and the rules with a failed case."""
    if not coverage.rules:
        return "coverage: no case names a rule (jellyt:coversRule) and no rules file was found"
    width = max(len("rule"), *(len(r.rule.id) for r in coverage.rules))
    lines = [f"{'rule':<{width}}  cases  passed  failed  skipped  section"]
    for entry in coverage.rules:
        section = entry.rule.section or ("(not in a rules file)" if not entry.listed else "")
        if entry.cases:
            counts = f"{len(entry.cases):5}  {entry.passed:6}  {entry.failed:6}  {entry.skipped:7}"
        else:
            counts = f"{0:5}  {'-':>6}  {'-':>6}  {'-':>7}"
        lines.append(f"{entry.rule.id:<{width}}  {counts}  {section}".rstrip())
    total = len(coverage.rules)
    uncovered = coverage.uncovered
    failing = coverage.failing
    lines.append(
        f"{total} rules: {total - len(uncovered)} covered, {len(uncovered)} with no case"
        + (f" ({', '.join(r.id for r in uncovered)})" if uncovered else "")
        + f"; {len(failing)} with a failed case"
        + (f" ({', '.join(r.id for r in failing)})" if failing else "")
    )
    if coverage.untagged:
        lines.append(f"{len(coverage.untagged)} cases name no rule")
    return "\n".join(lines)
