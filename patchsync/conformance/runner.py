"""Running Jelly conformance manifests: the Jelly-Patch suite and the upstream Jelly-RDF suite.

A manifest (``manifest.ttl``) lists test cases in ``mf:entries``; each case has a test
class (``jellyt:TestPatchFromJelly``, ``jellyt:TestRdfToJelly``, ...), is either
``jellyt:TestPositive`` or ``jellyt:TestNegative``, and names its input files in
``mf:action`` and expected outputs in ``mf:result``. Relative IRIs in a manifest resolve
against its ``BASE``, which stands for the directory the manifest file is in.

:func:`run_manifests` runs every case and returns a :class:`ConformanceReport`. The work
for a case is chosen by its test class in a table of runners (the suites' own table is
:data:`patchsync.conformance.RUNNERS`; ``patch`` and ``rdf`` hold its entries). Nothing here prints or
exits; the CLI presents the report.

Pass criteria (``tests/data/upstream/jelly-rdf/vocabulary.ttl`` and
``conformance/patch/vocabulary.ttl``):

* Patch from Jelly, positive: the stream decodes without error into as many patches as
  ``mf:result`` lists files, each equal row by row to its RDF Patch text. Terms are
  compared as canonical N-Triples strings (so lexical forms and blank node labels must
  match exactly). RDF Patch text has no form for the default graph or for the IRI of a
  ``PD`` row, so a default-graph term compares equal to no graph and a ``PD`` IRI is
  ignored.
* Patch from Jelly, negative: decoding raises :class:`~patchsync.errors.DecodeError`.
* Patch to Jelly: ``mf:action`` lists an options stream and one RDF Patch text per patch.
  Positive: the encoder, given those options, writes a stream that decodes back to the
  same options and the same patches. Negative: encoding raises
  :class:`~patchsync.errors.EncodeError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urljoin, urlparse
from urllib.request import url2pathname

from rdflib import RDF, Graph, Namespace, URIRef
from rdflib.collection import Collection
from rdflib.term import Node

__all__ = [
    "JELLYT",
    "MF",
    "CaseFailed",
    "CaseResult",
    "CaseSkipped",
    "ConformanceReport",
    "Runner",
    "Status",
    "TestCase",
    "run_manifests",
]

MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
JELLYT = Namespace("https://w3id.org/jelly/dev/tests/vocab#")

Status = Literal["passed", "failed", "skipped"]

# Classes every case carries besides its test class.
_GENERIC_CLASSES = frozenset({str(JELLYT.Test), str(JELLYT.TestPositive), str(JELLYT.TestNegative)})
_BASE = re.compile(r"^\s*(?:@base|BASE)\s*<([^>]*)>", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one test case.

    ``id`` is the case's IRI, ``short_id`` the part of it after the manifest's base
    (``group/pos_001``), ``message`` says why a case failed or was skipped (for a passed
    negative case, the error that was expected). ``rules`` are the IRIs of the
    specification rules the case covers (``jellyt:coversRule``), sorted.
    """

    id: str
    short_id: str
    name: str
    status: Status
    message: str
    test_class: str
    manifest: Path
    rules: tuple[str, ...] = ()


@dataclass(slots=True)
class ConformanceReport:
    """Every case result, in manifest order, with counts by status."""

    results: list[CaseResult] = field(default_factory=list)

    def _count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def passed(self) -> int:
        return self._count("passed")

    @property
    def failed(self) -> int:
        return self._count("failed")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def counts(self) -> dict[str, int]:
        return {"passed": self.passed, "failed": self.failed, "skipped": self.skipped, "total": self.total}

    @property
    def ok(self) -> bool:
        """No case failed (skipped cases are allowed)."""
        return self.failed == 0

    def with_status(self, status: Status) -> list[CaseResult]:
        return [r for r in self.results if r.status == status]


@dataclass(frozen=True, slots=True)
class TestCase:
    """One manifest entry with its files resolved to local paths.

    ``action`` and ``result`` are lists; ``action_is_list`` and ``result_is_list`` say
    whether the manifest gave an RDF list or a single IRI. ``result`` is ``None`` when the
    case has no ``mf:result``.
    """

    __test__ = False  # not a pytest class

    id: str
    short_id: str
    name: str
    positive: bool
    test_class: str
    action: list[Path]
    action_is_list: bool
    result: list[Path] | None
    result_is_list: bool
    manifest: Path
    #: IRIs of the specification rules the case covers (``jellyt:coversRule``), sorted.
    rules: tuple[str, ...] = ()


class CaseFailed(Exception):
    """Raised by a runner: the case failed, for the reason given."""


class CaseSkipped(Exception):
    """Raised by a runner: the case cannot be run here, for the reason given."""


#: A runner checks one case: it returns a note on success (may be empty) or raises
#: :class:`CaseFailed` / :class:`CaseSkipped`. Any other exception counts as a failure.
Runner = Callable[[TestCase], str]


class _ManifestError(Exception):
    pass


# -- running ------------------------------------------------------------------------------


def run_manifests(
    paths: Sequence[str | Path],
    *,
    runners: Mapping[str, Runner],
) -> ConformanceReport:
    """Run every case of the manifests at ``paths``, in order.

    ``runners`` maps test class IRIs to runners (the suites' table is
    :data:`patchsync.conformance.RUNNERS`). A manifest
    that cannot be read is reported as one failed result whose ``id`` is the manifest's
    file URI; a case whose test class has no runner fails with a message saying so.
    """
    table = runners
    report = ConformanceReport()
    for path in paths:
        manifest = Path(path)
        try:
            cases = list(_load_manifest(manifest, table))
        except _ManifestError as exc:
            uri = manifest.resolve().as_uri()
            report.results.append(CaseResult(uri, manifest.name, "manifest", "failed", str(exc), "", manifest))
            continue
        for case in cases:
            report.results.append(case if isinstance(case, CaseResult) else _run_case(case, table))
    return report


def _run_case(case: TestCase, table: Mapping[str, Runner]) -> CaseResult:
    status: Status
    try:
        message = table[case.test_class](case)
        status = "passed"
    except CaseFailed as exc:
        status, message = "failed", str(exc)
    except CaseSkipped as exc:
        status, message = "skipped", str(exc)
    except Exception as exc:  # a runner bug or an unexpected error in the code under test
        status, message = "failed", f"unexpected {type(exc).__name__}: {exc}"
    return CaseResult(case.id, case.short_id, case.name, status, message, case.test_class, case.manifest, case.rules)


# -- manifests ------------------------------------------------------------------------------


def _load_manifest(path: Path, table: Mapping[str, Runner]) -> Iterable[TestCase | CaseResult]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _ManifestError(f"cannot read manifest {path}: {exc}") from None
    file_uri = path.resolve().as_uri()
    graph = Graph()
    try:
        graph.parse(data=text, format="turtle", publicID=file_uri)
    except Exception as exc:  # rdflib raises a variety of parser errors
        raise _ManifestError(f"manifest {path} is not valid Turtle: {exc}") from None
    m = _BASE.search(text)
    base = urljoin(file_uri, m.group(1)) if m is not None else file_uri.rsplit("/", 1)[0] + "/"
    resolve = _resolver(base, path.resolve().parent)

    manifests = sorted(graph.subjects(RDF.type, MF.Manifest), key=str)
    if not manifests:
        raise _ManifestError(f"{path} has no mf:Manifest")
    for node in manifests:
        entries = graph.value(node, MF.entries)
        if entries is None:
            continue
        for entry in Collection(graph, entries):
            yield _case(graph, entry, base, resolve, path, table)


def _resolver(base: str, directory: Path) -> Callable[[Node], Path]:
    def resolve(node: Node) -> Path:
        if not isinstance(node, URIRef):
            raise _ManifestError(f"expected a file IRI, found {node!r}")
        iri = str(node)
        if iri.startswith(base):
            return directory.joinpath(*unquote(iri[len(base) :]).split("/"))
        if iri.startswith("file:"):
            return Path(url2pathname(urlparse(iri).path))
        raise _ManifestError(f"{iri} is neither under the manifest's base {base} nor a file IRI")

    return resolve


def _case(
    graph: Graph,
    entry: Node,
    base: str,
    resolve: Callable[[Node], Path],
    manifest: Path,
    table: Mapping[str, Runner],
) -> TestCase | CaseResult:
    iri = str(entry)
    short_id = iri[len(base) :] if iri.startswith(base) else iri
    name = str(graph.value(entry, MF.name) or "")
    classes = {str(c) for c in graph.objects(entry, RDF.type)}
    rules = tuple(sorted(str(r) for r in graph.objects(entry, JELLYT.coversRule)))

    def failed(message: str, test_class: str = "") -> CaseResult:
        return CaseResult(iri, short_id, name, "failed", message, test_class, manifest, rules)

    known = sorted(c for c in classes if c in table)
    if len(known) != 1:
        specific = sorted(classes - _GENERIC_CLASSES)
        if not known:
            return failed(f"unknown test class {', '.join(specific) or '(none)'}: no runner for it")
        return failed(f"ambiguous test classes {', '.join(known)}")
    test_class = known[0]
    positive = str(JELLYT.TestPositive) in classes
    if positive == (str(JELLYT.TestNegative) in classes):
        return failed("a case must be exactly one of jellyt:TestPositive and jellyt:TestNegative", test_class)
    try:
        action, action_is_list = _files(graph, graph.value(entry, MF.action), resolve)
        if action is None:
            return failed("the case has no mf:action", test_class)
        result, result_is_list = _files(graph, graph.value(entry, MF.result), resolve)
    except _ManifestError as exc:
        return failed(str(exc), test_class)
    return TestCase(
        iri, short_id, name, positive, test_class, action, action_is_list, result, result_is_list, manifest, rules
    )


def _files(graph: Graph, node: Node | None, resolve: Callable[[Node], Path]) -> tuple[list[Path] | None, bool]:
    if node is None:
        return None, False
    if node == RDF.nil or graph.value(node, RDF.first) is not None:
        return [resolve(item) for item in Collection(graph, node)], True
    return [resolve(node)], False
