"""Record edits to an rdflib dataset as a patch log, then replay the log into a replica.

Run from the repository root::

    python examples/capture_and_replay.py [LOG]

LOG defaults to a temporary ``.jellyp`` file (``.rdfp`` gives RDF Patch text). The script
edits a dataset through ordinary rdflib calls (add, remove with a pattern, a Turtle parse,
a SPARQL update, a transaction that fails and is rolled back), prints the log as RDF Patch
text, replays it into an empty dataset with the applier and checks that the replica has
the same quads as the original.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rdflib import Dataset, Literal, Namespace, URIRef

from patchsync.apply import MemoryTarget, apply_file
from patchsync.capture import Recorder
from patchsync.codec.rdfp import write_rdfp
from patchsync.logs.patch_logs import read_events
from patchsync.terms.ntriples import NTriplesTerms, format_term
from patchsync.terms.rdflib_adapter import RdflibTerms

EX = Namespace("http://example.org/")


def edit(log: Path) -> Dataset:
    """Make some changes through rdflib and record them into ``log``."""
    dataset = Dataset()
    with Recorder(dataset, log, headers={"app": "capture-example"}) as recorder:
        ds = recorder.graph  # edit through this object; it writes through to `dataset`
        books = ds.graph(EX.books)
        with recorder.transaction(author="alice"):
            ds.bind("ex", EX)
            books.add((EX.b1, EX.title, Literal("Dune")))
            books.add((EX.b1, EX.year, Literal(1965)))
            books.add((EX.b2, EX.title, Literal("Solaris")))
        with recorder.transaction(author="bob"):
            books.remove((EX.b2, None, None))  # the concrete quads removed are recorded
            ds.parse(data="@prefix ex: <http://example.org/> . ex:b3 ex:title 'Kindred' .", format="turtle")
            ds.update(
                "INSERT { GRAPH <http://example.org/books> { ?b ex:read true } } WHERE { GRAPH ?g { ?b ex:year ?y } }"
            )
        try:
            with recorder.transaction():
                books.add((EX.b4, EX.title, Literal("never committed")))
                raise RuntimeError("validation failed")
        except RuntimeError:
            pass  # written as TX ... TA, and the dataset was rolled back
        ds.add((EX.b1, EX.rating, Literal(5)))  # outside a block: committed at close
    return dataset


def main() -> None:
    log = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "books.jellyp"
    if log.exists():
        log.unlink()  # the example starts a new log; a Recorder would otherwise append
    dataset = edit(log)
    print(f"# {log} ({log.stat().st_size} bytes)")
    print(write_rdfp(read_events(log)))

    replica = MemoryTarget()
    result = apply_file(log, replica)
    print(f"# replayed: {result}")

    nt = NTriplesTerms()
    rdflib_terms = RdflibTerms()
    default = nt.default_graph()

    def as_strings(term: URIRef) -> str:
        return format_term(rdflib_terms, term)

    expected = {
        (as_strings(s), as_strings(p), as_strings(o), default if g == URIRef("urn:x-rdflib:default") else as_strings(g))
        for s, p, o, g in dataset.quads((None, None, None, None))
    }
    assert set(replica.quads()) == expected, "the replica differs from the recorded dataset"
    print(f"# replica equals the recorded dataset: {len(expected)} quads")


if __name__ == "__main__":
    main()
