"""The file formats patchsync knows: one registry, looked up by name or file suffix.

Each :class:`Format` says what kind of file it is (a patch log, or RDF data), its names and
suffixes, whether it can hold named graphs, the name rdflib's parsers and serializers use
for it (if rdflib reads it), whether patchsync keeps its blank node labels, and what
patchsync can do with it (roles). Readers, writers, the CLI, ``diff`` and the file target
all ask here instead of keeping tables of their own; adding a format is one entry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from patchsync.errors import FormatError

#: Roles: what patchsync does with a format.
PATCH_LOG = "patch log"  # read and written as a patch log (apply, tail, convert, append)
RDF_CONVERT = "convert"  # RDF data that ``convert`` reads and writes
DIFF_INPUT = "diff input"  # RDF data that ``diff`` reads
FILE_TARGET = "file target"  # a ``file:`` target can be a file of this format
DUMP = "dump"  # ``dump --format``
MESSAGES = "messages"  # read and written as an RDF Message Log (docs/design.md §8)

#: The media type parameter that marks a message log (RDF Messages draft §2.1).
MESSAGES_PARAMETER = ("messages", "rdfm")


@dataclass(frozen=True, slots=True)
class Format:
    """One file format."""

    name: str
    suffixes: tuple[str, ...]
    #: ``"patch"`` or ``"rdf"``.
    kind: str
    roles: frozenset[str]
    #: Whether the format can name graphs (quads).
    graphs: bool = True
    #: rdflib's parser/serializer name, where patchsync reads or writes it through rdflib.
    rdflib_name: str | None = None
    #: Whether patchsync keeps blank node labels as written (docs/design.md §1).
    keeps_labels: bool = False
    #: The media type (without parameters), where the format has one.
    media_type: str | None = None
    #: Whether every file of the format is a message log (no ``--messages`` needed).
    messages_only: bool = False


def _f(
    name: str,
    suffixes: tuple[str, ...],
    kind: str,
    roles: set[str],
    *,
    graphs: bool = True,
    rdflib_name: str | None = None,
    keeps_labels: bool = False,
    media_type: str | None = None,
    messages_only: bool = False,
) -> Format:
    return Format(name, suffixes, kind, frozenset(roles), graphs, rdflib_name, keeps_labels, media_type, messages_only)


#: Every known format, in the order messages list them.
FORMATS: tuple[Format, ...] = (
    _f("jellyp", (".jellyp",), "patch", {PATCH_LOG}, keeps_labels=True),
    _f("rdfp", (".rdfp",), "patch", {PATCH_LOG}, keeps_labels=True, media_type="application/rdf-patch"),
    _f("jelly", (".jelly",), "rdf", {RDF_CONVERT, DIFF_INPUT, DUMP, MESSAGES}, keeps_labels=True,
       media_type="application/x-jelly-rdf"),
    _f("nt", (".nt",), "rdf", {RDF_CONVERT, DIFF_INPUT, FILE_TARGET, DUMP, MESSAGES}, graphs=False, rdflib_name="nt",
       keeps_labels=True, media_type="application/n-triples"),
    _f("nq", (".nq",), "rdf", {RDF_CONVERT, DIFF_INPUT, FILE_TARGET, DUMP, MESSAGES}, rdflib_name="nquads",
       keeps_labels=True, media_type="application/n-quads"),
    _f("ttl", (".ttl",), "rdf", {RDF_CONVERT, DIFF_INPUT, FILE_TARGET, DUMP, MESSAGES}, graphs=False,
       rdflib_name="turtle", keeps_labels=True, media_type="text/turtle"),
    _f("trig", (".trig",), "rdf", {RDF_CONVERT, DIFF_INPUT, FILE_TARGET, DUMP, MESSAGES}, rdflib_name="trig",
       keeps_labels=True, media_type="application/trig"),
    _f("rdf-thrift", (".rt",), "rdf", {RDF_CONVERT, DIFF_INPUT, DUMP}, rdflib_name="patchsync-rdf-thrift",
       keeps_labels=True),
    _f("rdf-protobuf", (".rpb",), "rdf", {RDF_CONVERT, DIFF_INPUT, DUMP}, rdflib_name="patchsync-rdf-protobuf",
       keeps_labels=True),
    _f("n3", (".n3",), "rdf", {DIFF_INPUT}, graphs=False, rdflib_name="n3"),
    _f("jsonld", (".jsonld",), "rdf", {DIFF_INPUT}, rdflib_name="json-ld", media_type="application/ld+json"),
    # Message logs only (RDF Messages draft §2.2, §2.3); media types as the draft proposes them.
    _f("ndjsonld", (".ndjsonld",), "rdf", {MESSAGES}, rdflib_name="json-ld", media_type="application/x-ld+ndjson",
       messages_only=True),
    _f("yamlld", (".yamlld",), "rdf", {MESSAGES}, rdflib_name="json-ld", media_type="application/rdfm+yaml",
       messages_only=True),
    _f("rdfxml", (".rdf", ".owl", ".xml"), "rdf", {DIFF_INPUT}, graphs=False, rdflib_name="xml",
       media_type="application/rdf+xml"),
)  # fmt: skip

_BY_NAME = {f.name: f for f in FORMATS}
_BY_SUFFIX = {suffix: f for f in FORMATS for suffix in f.suffixes}
_BY_MEDIA_TYPE = {f.media_type: f for f in FORMATS if f.media_type}


def with_role(role: str) -> tuple[Format, ...]:
    """The formats that have ``role``, in registry order."""
    return tuple(f for f in FORMATS if role in f.roles)


def names(role: str) -> list[str]:
    """The names of the formats that have ``role`` (for ``choices=`` and messages)."""
    return [f.name for f in with_role(role)]


def suffixes(role: str) -> list[str]:
    """The file suffixes of the formats that have ``role``."""
    return [s for f in with_role(role) for s in f.suffixes]


def by_name(name: str) -> Format | None:
    """The format called ``name`` (case and a leading dot ignored), or ``None``."""
    return _BY_NAME.get(name.lower().lstrip("."))


def get(name: str) -> Format:
    """The format called ``name``; :class:`FormatError` if there is none."""
    found = by_name(name)
    if found is None:
        raise FormatError(f"unknown format {name!r} (expected one of: {', '.join(_BY_NAME)})")
    return found


def by_suffix(path: str | os.PathLike[str]) -> Format | None:
    """The format of ``path`` by its suffix, or ``None``."""
    return _BY_SUFFIX.get(Path(path).suffix.lower())


def find(path: str | os.PathLike[str], given: str | None, role: str) -> Format | None:
    """The format named by ``given``, else by the suffix of ``path``, if it has ``role``."""
    found = by_name(given) if given else by_suffix(path)
    return found if found is not None and role in found.roles else None


def require(path: str | os.PathLike[str], given: str | None, role: str, what: str, *, nameable: bool = True) -> Format:
    """:func:`find`, or :class:`FormatError` naming what was expected (``what``: "patch", "RDF")."""
    found = find(path, given, role)
    if found is not None:
        return found
    if given:
        raise FormatError(f"unknown {what} format {given!r} (expected one of: {', '.join(names(role))})")
    suffix = Path(path).suffix.lower()
    known = by_suffix(path)
    if known is not None:
        # A format patchsync knows, used where it does not fit (Jelly-RDF data given as a patch log).
        reason = f"{path}: {suffix} is {_KIND_NAMES[known.kind]}, which cannot be used here"
    else:
        reason = f"{path}: cannot tell the format from the extension {suffix or '(none)'!r}"
    raise FormatError(f"{reason}; use one of {', '.join(suffixes(role))}" + (" or name the format" if nameable else ""))


def media_type(name: str, *, messages: bool = False) -> str:
    """The media type of the format called ``name``; with ``messages``, marked as a message log.

    A message log in a format that is not always one carries ``messages=rdfm`` (RDF Messages
    draft §2.1); formats that are always message logs need no parameter.
    """
    found = get(name)
    if found.media_type is None:
        raise FormatError(f"the {found.name} format has no media type")
    if messages and MESSAGES not in found.roles:
        raise FormatError(f"the {found.name} format cannot hold a message log")
    if messages and not found.messages_only:
        return f"{found.media_type}; {MESSAGES_PARAMETER[0]}={MESSAGES_PARAMETER[1]}"
    return found.media_type


def from_media_type(value: str) -> tuple[Format, bool]:
    """The format a media type names (parameters allowed) and whether it marks a message log.

    ``messages=rdfm`` marks a message log, as does a format that is always one. Other
    parameters (``charset``, ``version``) are ignored. :class:`FormatError` for an unknown type.
    """
    kind, *parameters = (part.strip() for part in value.split(";"))
    found = _BY_MEDIA_TYPE.get(kind.lower())
    if found is None:
        raise FormatError(f"unknown media type {kind!r} (expected one of: {', '.join(_BY_MEDIA_TYPE)})")
    marked = False
    for parameter in parameters:
        key, _, given = parameter.partition("=")
        if key.strip().lower() == MESSAGES_PARAMETER[0]:
            if given.strip().strip('"').lower() != MESSAGES_PARAMETER[1]:
                raise FormatError(f"unknown messages={given.strip()} in {value!r} (expected messages=rdfm)")
            if MESSAGES not in found.roles:
                raise FormatError(f"{value!r}: the {found.name} format cannot hold a message log")
            marked = True
    return found, marked or found.messages_only


#: How messages name each kind of file.
_KIND_NAMES = {"patch": "a patch log", "rdf": "RDF data"}
