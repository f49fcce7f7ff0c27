"""``patchsync diff OLD NEW`` and ``patchsync reverse PATCH``: writing patches from data."""

from __future__ import annotations

import argparse
from typing import Any

from patchsync import formats
from patchsync.cli.common import Subcommands, output, patch_format, read_all, refuse_input_as_output, source_name
from patchsync.errors import FormatError


def register(sub: Subcommands) -> None:
    diff = sub.add_parser(
        "diff",
        help="the patch turning one RDF file into another",
        description="Write the minimal patch turning OLD into NEW. Inputs: "
        + " ".join(formats.suffixes(formats.DIFF_INPUT))
        + "; blank nodes are matched by label ("
        + " ".join(s for f in formats.with_role(formats.DIFF_INPUT) if f.keeps_labels for s in f.suffixes)
        + " keep labels), or by structure with --canonical.",
    )
    diff.add_argument("old", metavar="OLD", help="the RDF file the patch applies to")
    diff.add_argument("new", metavar="NEW", help="the RDF file the patch produces")
    diff.add_argument("-o", "--output", required=True, help="the patch (.jellyp or .rdfp, or - with --to)")
    diff.add_argument("--to", dest="to_format", choices=["jellyp", "rdfp"], help="output format")
    diff.add_argument("--canonical", action="store_true", help="match blank nodes by rdflib's canonicalization")
    diff.add_argument("--prefixes", action="store_true", help="also write PA/PD rows for changed prefixes")
    diff.set_defaults(func=run_diff)

    reverse = sub.add_parser(
        "reverse",
        help="the inverse of a recorded log",
        description="Write the patches that undo a log of real changes (as patchsync.capture records), "
        "last patch first.",
    )
    reverse.add_argument("log", metavar="PATCH", help="a .jellyp or .rdfp log, or - with --from")
    reverse.add_argument("-o", "--output", required=True, help="output file (.jellyp or .rdfp, or - with --to)")
    reverse.add_argument("--from", dest="from_format", choices=["jellyp", "rdfp"], help="input format")
    reverse.add_argument("--to", dest="to_format", choices=["jellyp", "rdfp"], help="output format")
    reverse.set_defaults(func=run_reverse)


def run_diff(args: argparse.Namespace) -> int:
    from patchsync.logs.convert import FeatureScan
    from patchsync.logs.patch_logs import write_events

    out_fmt = patch_format(args.output, args.to_format, writing=True)
    own = not args.canonical and all(formats.find(p, None, formats.RDF_CONVERT) for p in (args.old, args.new))
    events, adapter = _own_terms_diff(args) if own else _rdflib_diff(args)
    # The patch declares what its statements use (RDF-star, generalized), as convert does.
    scan = FeatureScan()
    for event in events:
        scan.see(event)
    with output(args.output) as out:
        write_events(events, out, out_fmt, options=scan.options(), adapter=adapter)
    return 0


def _own_terms_diff(args: argparse.Namespace) -> tuple[list[Any], Any]:
    """The diff over patchsync's N-Triples terms: exact lexical forms and blank node labels,
    RDF-star and generalized statements, for every format ``convert`` reads."""
    import uuid

    from patchsync.capture.diff import diff_quads
    from patchsync.logs.rdf_files import read_rdf_quads
    from patchsync.terms.ntriples import NTriplesTerms

    nt = NTriplesTerms()
    old, new = read_rdf_quads(args.old), read_rdf_quads(args.new)

    def prefixes(content: Any) -> dict[str, str]:
        return {name: nt.iri(iri) for name, iri in content.namespaces} if args.prefixes else {}

    events = diff_quads(set(old.quads), set(new.quads), prefixes(old), prefixes(new), nt.iri(uuid.uuid4().urn))
    return events, nt


def _rdflib_diff(args: argparse.Namespace) -> tuple[list[Any], Any]:
    """The diff through rdflib: formats only rdflib reads, and ``--canonical``."""
    from patchsync.capture.diff import diff, read_dataset
    from patchsync.terms.rdflib_adapter import RdflibTerms

    try:
        old, new = read_dataset(args.old), read_dataset(args.new)
    except FormatError as exc:
        if not args.canonical:
            raise
        raise FormatError(
            f"{exc} (--canonical goes through rdflib; without it RDF-star is compared by label)"
        ) from None
    return diff(old, new, canonical=args.canonical, prefixes=args.prefixes), RdflibTerms()


def run_reverse(args: argparse.Namespace) -> int:
    from patchsync.capture.reverse_log import reverse_log

    refuse_input_as_output([args.log], args.output)
    in_fmt = patch_format(args.log, args.from_format)
    out_fmt = patch_format(args.output, args.to_format, writing=True)
    data = read_all(args.log)
    with output(args.output) as out:
        reverse_log(data, in_fmt, out, out_fmt, source=source_name(args.log))
    return 0
