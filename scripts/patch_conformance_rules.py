"""The rules of the Jelly-Patch specification that the Jelly-Patch conformance suite covers.

Each rule has a stable id (the fragment of its IRI in ``rules.ttl``, never reused or
renamed), the specification and section it comes from, the rule's text (quoted or closely
paraphrased), and the phrases that tag a case with it: a case covers every rule one of
whose phrases occurs in its ``mf:name`` (case-insensitive). The case names quote the rule
they exercise, so the tagging follows the text a reader sees; ``gen_patch_conformance.py``
refuses a case that matches no rule. Rules of Jelly-RDF that Jelly-Patch inherits
("All concepts, definitions, and Protobuf messages defined there apply also here") are
listed with the Jelly-RDF section they come from.

Imported by ``gen_patch_conformance.py``, which writes ``rules.ttl``, tags the manifests
and writes the coverage table of the suite's README.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The specifications rules come from: short name -> (title, permanent URL).
SPECS = {
    "patch": ("Jelly-Patch", "https://w3id.org/jelly/dev/specification/patch/"),
    "rdf": ("Jelly-RDF", "https://w3id.org/jelly/dev/specification/serialization/"),
}

#: IRI namespace of the rules (``rules.ttl``); a rule's IRI is this plus its id.
RULES_NS = "https://w3id.org/jelly/dev/tests/patch/rules#"


@dataclass(frozen=True)
class Rule:
    id: str
    spec: str
    section: str
    text: str
    phrases: tuple[str, ...]

    @property
    def anchor(self) -> str:
        """The section's anchor in the published specification (its heading, slugified)."""
        slug = "".join(c if c.isalnum() else "-" for c in self.section.lower())
        return "-".join(part for part in slug.split("-") if part)

    @property
    def url(self) -> str:
        return f"{SPECS[self.spec][1]}#{self.anchor}"


def _r(id: str, spec: str, section: str, text: str, *phrases: str) -> Rule:
    return Rule(id, spec, section, text, tuple(p.lower() for p in phrases))


RULES: tuple[Rule, ...] = (
    # -- Jelly-Patch: format, frames and rows ------------------------------------------------
    _r("protobuf", "patch", "Format specification",
       "All implementations MUST use a compliant Protocol Buffers implementation.",
       "compliant protocol buffers"),
    _r("frame-order", "patch", "Ordering",
       "Patch frames MUST be processed strictly in order; each patch frame MUST be processed in its entirety "
       "before the next patch frame is processed.",
       "used in later frames", "carry across the frames"),
    _r("row-one-field", "patch", "Patch rows",
       "A patch row MUST have exactly one of its fields set.",
       "exactly one of the fields"),
    _r("row-patch-types", "patch", "Patch rows",
       "The row fields correspond directly to the row types of RDF Patch and MUST be interpreted as such.",
       "with a and d rows", "pa and pd rows"),
    # -- stream types --------------------------------------------------------------------------
    _r("stream-type-unspecified", "patch", "Patch stream types",
       "PATCH_STREAM_TYPE_UNSPECIFIED MUST NOT be used; consumers SHOULD throw an error if it is used.",
       "patch_stream_type_unspecified"),
    _r("stream-type-frame", "patch", "Patch stream types",
       "PATCH_STREAM_TYPE_FRAME: every RdfPatchFrame message is a single, complete RDF Patch.",
       "every rdfpatchframe message is a single", "frame: two patches"),
    _r("stream-type-flat", "patch", "Patch stream types",
       "PATCH_STREAM_TYPE_FLAT: the entire stream is a single, complete RDF Patch.",
       "entire stream is a single, complete rdf patch"),
    _r("stream-type-punctuated", "patch", "Patch stream types",
       "PATCH_STREAM_TYPE_PUNCTUATED: the stream is a sequence of RDF Patches, marked by punctuation marks.",
       "sequence of rdf patches, marked by punctuation"),
    _r("punctuation-only-punctuated", "patch", "Patch stream types",
       "The punctuation mark MUST NOT appear in streams of type other than PUNCTUATED.",
       "punctuation field set"),
    _r("punctuation-ends-patch", "patch", "Punctuated streams",
       "The punctuation mark MUST occur at the end of an RDF Patch; a stream starting with one begins with an "
       "empty RDF Patch.",
       "punctuation mark must occur at the end", "interpreted as an empty rdf patch"),
    _r("punctuation-anywhere", "patch", "Punctuated streams",
       "There are no additional restrictions on where the punctuation mark is placed within the frame.",
       "no additional restrictions on where the punctuation", "beginning, middle, or end of the frame"),
    # -- statement types -----------------------------------------------------------------------
    _r("statement-type-unspecified", "patch", "Statement types",
       "STATEMENT_TYPE_UNSPECIFIED MUST NOT be used; consumers SHOULD throw an error if it is used.",
       "statement_type_unspecified"),
    _r("statement-type-triples", "patch", "RDF statements",
       "STATEMENT_TYPE_TRIPLES: statements are RDF triples; the graph oneof MUST NOT be set, and if it is set "
       "the consumer SHOULD ignore it.",
       "in triples the graph oneof must not be set", "graph oneof must not be set in statement_type_triples"),
    _r("statement-type-quads", "patch", "RDF statements",
       "STATEMENT_TYPE_QUADS: the RdfQuad message MUST be interpreted as an RDF quad.",
       "interpreted as an rdf quad", "patches of quads"),
    _r("quads-graph-set", "patch", "RDF statements",
       "In QUADS streams the subject, predicate, object and graph oneofs MUST be set, unless a repeated term "
       "is used.",
       "graph oneof must be set to one of the possible values", "oneofs must be set, unless a repeated term"),
    # -- options ---------------------------------------------------------------------------------
    _r("options-first-row", "patch", "Patch stream options",
       "The patch stream options MUST be the first row in the stream.",
       "must be the first row"),
    _r("options-repeated", "patch", "Patch stream options",
       "The options MAY appear more than once in the stream, but MUST be identical to all previous "
       "occurrences; consumers SHOULD NOT throw an error if they are present more than once.",
       "identical to all previous occurrences", "present more than once"),
    _r("options-generalized", "patch", "Patch stream options",
       "generalized_statements MUST be set to true if the stream contains generalized RDF triples or graphs.",
       "generalized rdf triples", "generalized_statements option is false", "generalized triples",
       "generalized quads", "both generalized_statements and rdf_star"),
    _r("options-rdf-star", "patch", "Patch stream options",
       "rdf_star MUST be set to true if the stream uses RDF-star.",
       "stream uses rdf-star", "rdf-star: quoted triples", "both generalized_statements and rdf_star"),
    _r("options-unused-feature", "patch", "Patch stream options",
       "generalized_statements and rdf_star SHOULD NOT be set to true if the stream does not use the feature "
       "(not an error).",
       "should not be set to true"),
    _r("options-name-table-min", "patch", "Patch stream options",
       "max_name_table_size is REQUIRED and MUST be greater than or equal to 8.",
       "greater than or equal to 8", "smallest allowed max_name_table_size", "name table of 8 (the minimum)"),
    _r("options-lookup-size", "patch", "Patch stream options",
       "The size of each lookup MUST NOT exceed the value of its max_*_table_size field.",
       "size of the lookup must not exceed", "must not exceed the maximum size of the lookup"),
    _r("options-prefix-lookup-off", "patch", "Patch stream options",
       "If max_prefix_table_size is 0, the prefix lookup MUST NOT be used in the stream.",
       "prefix lookup must not be used", "prefix lookup disabled"),
    _r("options-datatype-lookup-off", "patch", "Patch stream options",
       "If max_datatype_table_size is 0, the datatype lookup MUST NOT be used (no datatype literals).",
       "datatype lookup must not be used"),
    _r("options-version", "patch", "Patch stream options",
       "The version tag MUST be greater than 0; the consumer SHOULD throw an error if it is zero or greater "
       "than the version tag of the implementation.",
       "version tag"),
    # -- repeated terms --------------------------------------------------------------------------
    _r("repeat-after-repeat", "rdf", "Repeated terms",
       "A repeated term in a given position MAY occur after a repeated term.",
       "may occur after a repeated term"),
    _r("repeat-not-first-row", "rdf", "Repeated terms",
       "Repeated terms MUST NOT occur in the first statement row of the stream.",
       "must not occur in the first statement row"),
    _r("repeat-across-frames", "rdf", "Repeated terms",
       "Repeated terms MAY occur in the first statement row of a stream frame; they MUST be interpreted as "
       "repeated from the previous stream frame.",
       "repeated from the previous stream frame"),
    _r("repeat-not-in-quoted", "rdf", "Repeated terms",
       "Repeated terms MUST NOT occur in quoted triples.",
       "must not occur in quoted triples", "must not occur inside quoted triples"),
    _r("repeat-any-operation", "patch", "Repeated terms",
       "An empty term MUST be interpreted as a repeated term from the last RdfQuad, whether or not both "
       "operations are of the same type (add or delete).",
       "regardless of whether both operations"),
    _r("repeat-graph", "patch", "Namespaces",
       "In QUADS streams an unset graph oneof MUST be interpreted as a repeated graph term from the last "
       "RdfQuad or namespace row.",
       "repeated graph term", "sharing the repeated graph"),
    _r("repeat-namespace-graph", "patch", "Namespaces",
       "The graph of RdfPatchNamespace MUST be interpreted in the same manner as if it appeared in a RdfQuad "
       "(its last value is shared with quads).",
       "in the same manner as if it appeared in a rdfquad", "rdfnamespacedeclaration", "sharing the repeated graph"),
    # -- namespaces ------------------------------------------------------------------------------
    _r("namespace-fields", "patch", "Namespaces",
       "The namespace name may be empty; value is REQUIRED for PA and OPTIONAL for PD.",
       "required for pa", "required for the namespace add", "empty prefix name"),
    _r("namespace-graph", "patch", "Namespaces",
       "The graph oneof of a namespace row follows the Jelly-RDF graph node encoding and MUST NOT be set in "
       "TRIPLES streams.",
       "graph node encoding", "graph oneof must not be set to any value in streams with type",
       "ignored, as for rdfquad"),
    _r("namespace-value-first", "patch", "RDF terms and graph nodes",
       "In RdfPatchNamespace, the IRI in the value field MUST be processed before the RDF term in the graph "
       "oneof.",
       "value field must be processed before"),
    # -- transactions ----------------------------------------------------------------------------
    _r("tx-end-after-start", "patch", "Transactions",
       "A transaction_commit or transaction_abort row MUST have a previous transaction operation equal to "
       "transaction_start.",
       "transaction_commit operation must have", "transaction_abort operation must have"),
    _r("tx-start-after-end", "patch", "Transactions",
       "A transaction_start row MUST have a previous transaction operation that is undefined or equal to "
       "transaction_commit or transaction_abort.",
       "transaction_start operation must have"),
    _r("tx-several-per-frame", "patch", "Transactions",
       "A patch frame may contain multiple transactions, regardless of the stream type.",
       "may contain multiple transactions", "several per patch"),
    _r("tx-within-patch", "patch", "Transactions",
       "A transaction MUST start and commit/abort within one RDF Patch, regardless of the stream type.",
       "must start and commit/abort within one rdf patch"),
    _r("tx-frame", "patch", "Transactions",
       "In PATCH_STREAM_TYPE_FRAME, transactions MUST NOT span multiple patch frames.",
       "transactions must not span multiple patch frames"),
    _r("tx-flat", "patch", "Transactions",
       "In PATCH_STREAM_TYPE_FLAT, transactions may span multiple frames.",
       "in patch_stream_type_flat transactions may span"),
    _r("tx-punctuated", "patch", "Transactions",
       "In PATCH_STREAM_TYPE_PUNCTUATED, transactions may span multiple patch frames but MUST NOT contain "
       "punctuation marks within their scope.",
       "in patch_stream_type_punctuated transactions"),
    _r("tx-optional", "patch", "Transactions",
       "Transactions are OPTIONAL: headers and operations on namespaces and statements may be used within or "
       "outside of transactions.",
       "users are free to use headers", "rows outside transactions"),
    _r("rdf-patch-rules-not-enforced", "patch", "Transaction syntax and semantics",
       "RDF Patch's further restrictions (e.g. headers first, outside transactions) are not enforced by "
       "Jelly-Patch.",
       "does not enforce the rdf patch rule"),
    # -- headers and terms -----------------------------------------------------------------------
    _r("header-value", "patch", "Headers",
       "The key may be empty; the value oneof MUST be set to one of the possible values (an RDF term).",
       "value oneof must be set to one of the possible values", "headers with iri, blank node and literal"),
    _r("header-no-repeat", "patch", "Headers",
       "Repeated term encoding MUST NOT be used for the value oneof in the RdfPatchHeader message.",
       "repeated term encoding must not be used for the value oneof"),
    _r("header-triple-term", "patch", "RDF terms and graph nodes",
       "RDF term encoding is also used for the h_iri, h_bnode, h_literal and h_triple_term fields.",
       "h_triple_term", "as a header value"),
    _r("terms-in-row-order", "patch", "RDF terms and graph nodes",
       "Terms in RdfPatchHeader and RdfPatchNamespace messages MUST be processed as if they were present in "
       "RdfQuad messages, in the order in which their rows appear.",
       "processed as if they were present in the rdfquad"),
    _r("delimited", "patch", "Delimited variant",
       "A byte stream in the delimited variant MUST consist of a series of delimited RdfPatchFrame messages "
       "(each prefixed by its length as a varint).",
       "delimited variant must consist", "varint prepended"),
    _r("delimited-files", "patch", "Internet media type and file extension",
       "Files SHOULD be saved in the delimited variant of Jelly-Patch.",
       "files should be saved in the delimited variant"),
    _r("security-lookup-sizes", "patch", "Security considerations",
       "Consumers must check that requested lookup sizes are not overly large (the limits are "
       "implementation-defined).",
       "overly large", "limits this suite assumes"),
    _r("security-nesting", "patch", "Security considerations",
       "The consumer SHOULD throw an error if the depth of quoted triple nesting exceeds the capabilities of "
       "the implementation (the limit is implementation-defined).",
       "depth of the nesting exceeds"),
    # -- inherited from Jelly-RDF ----------------------------------------------------------------
    _r("lookup-entry-ids", "rdf", "Prefix, name, and datatype lookup entries",
       "An entry id of 0 MUST be interpreted as 1 in the first entry of a lookup and as previous_index + 1 "
       "in any other.",
       "previous_index + 1"),
    _r("lookup-replace", "rdf", "Prefix, name, and datatype lookup entries",
       "A lookup entry may be replaced; the modification MUST be applied to all subsequent rows in the stream.",
       "modification must be applied to all subsequent rows", "replaced in place", "entries to be replaced",
       "entry is replaced", "replaces the single prefix entry"),
    _r("lookup-defined-before-use", "rdf", "Prefix, name, and datatype lookup entries",
       "The first use of a given lookup element MUST be after it is defined in the lookup.",
       "first use of a given lookup element must be after"),
    _r("iri-prefix-id-zero", "rdf", "IRIs",
       "prefix_id 0 in the first IRI of the stream is the empty prefix; later it MUST be interpreted as the "
       "last explicitly specified (non-zero) prefix identifier.",
       "interpreted as an empty prefix", "last explicitly specified (non-zero) prefix"),
    _r("iri-name-id-zero", "rdf", "IRIs",
       "name_id 0 MUST be interpreted as previous_name_id + 1 (1 in the first IRI of the stream).",
       "previous_name_id + 1"),
    _r("iri-order", "rdf", "IRIs",
       "IRIs MUST be processed strictly in order, by row and then by term (subject, predicate, object, graph), "
       "recursively in quoted triples.",
       "processed strictly in order, by row and then by term"),
    _r("iri-concatenation", "rdf", "IRIs",
       "The IRI is constructed by concatenating the prefix and the name (how IRIs are split is up to the "
       "producer).",
       "concatenating the prefix and the name", "how iris are split"),
    _r("literal-simple", "rdf", "Literals",
       "If no literalKind field is set, the literal MUST be interpreted as a simple literal; lexical forms are "
       "kept as written.",
       "no literalkind"),
    _r("literal-datatype-entry", "rdf", "Literals",
       "A datatype id MUST be greater than 0 and correspond to a valid entry in the datatype lookup.",
       "valid entry in the datatype lookup"),
    _r("bnode-label", "rdf", "Blank nodes",
       "The blank node identifier may be any valid UTF-8 string; RDF Patch keeps labels as system identifiers.",
       "any valid utf-8 string"),
    _r("quoted-triples", "rdf", "Quoted triples (RDF-star)",
       "Quoted triples may stand as subject or object and may be nested up to arbitrary depth.",
       "nested up to arbitrary depth", "quoted triples in subject and object position"),
    _r("utf8", "rdf", "Jelly serialization format specification",
       "All strings in the serialization are UTF-8 encoded.",
       "utf-8 encoded"),
    # -- rules no case covers yet (listed so coverage reports show them) -----------------------
    _r("backward-compatibility", "patch", "Backward compatibility",
       "An implementation MUST be able to read all messages from previous releases of the protocol with the "
       "same MAJOR version (only version 1 exists so far)."),
    _r("options-version-lower", "patch", "Patch stream options",
       "The consumer SHOULD NOT throw an error if the version tag is not zero but lower than its own (only "
       "version 1 exists so far)."),
    _r("namespace-name-pn-prefix", "patch", "Namespaces",
       "The namespace name SHOULD conform to the PN_PREFIX production of RDF 1.1 Turtle (a SHOULD for "
       "producers; consumers are not asked to check it)."),
)  # fmt: skip


def rules_for(name: str) -> tuple[str, ...]:
    """The ids of the rules a case named ``name`` covers, in :data:`RULES` order."""
    lowered = name.lower()
    return tuple(rule.id for rule in RULES if any(phrase in lowered for phrase in rule.phrases))


def check_ids() -> None:
    """Rule ids are unique and usable as IRI fragments (stable ids: never rename one)."""
    seen: set[str] = set()
    for rule in RULES:
        if rule.id in seen or not rule.id.replace("-", "").isalnum() or rule.id != rule.id.lower():
            raise SystemExit(f"bad or duplicate rule id {rule.id!r}")
        seen.add(rule.id)
