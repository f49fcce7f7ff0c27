"""The options a patch subscriber asks for: met, or refused naming the option (no I/O).

``SubscribePatch``'s ``requested_options`` (an ``RdfPatchOptions`` message) ask that each
patch be re-encoded within the subscriber's limits: lookup sizes no larger than asked (the
Jelly-Patch specification's minimum of 8 names holds), RDF-star and generalized statements
only when allowed, and a statement type. Anything the server cannot meet is one
:class:`~patchsync.errors.UsageError` naming the field (``INVALID_ARGUMENT``), never an
exception of the protobuf or enum machinery.
"""

from __future__ import annotations

from typing import Any

from patchsync.errors import UsageError
from patchsync.options import MIN_NAME_TABLE, PatchOptions, StatementType, name_table_too_small


def negotiate_patch(requested: Any | None) -> PatchOptions | None:
    """The options to re-encode patches with for ``requested``, or ``None`` when the
    request asks for nothing (patches are sent as the log holds them)."""
    if requested is None or requested.ByteSize() == 0:
        return None
    defaults = PatchOptions()
    names = requested.max_name_table_size or defaults.max_name_table_size
    broken = name_table_too_small(names)
    if broken:
        raise UsageError(f"requested_options: {broken}")
    statement = defaults.statement_type
    if requested.statement_type:
        known = {int(t) for t in StatementType}
        if requested.statement_type not in known:
            raise UsageError(
                f"requested_options.statement_type {requested.statement_type}: not a statement type "
                f"(1 TRIPLES, 2 QUADS, or 0 for the log's own)"
            )
        statement = StatementType(requested.statement_type)
    return PatchOptions(
        statement_type=statement,
        rdf_star=requested.rdf_star,
        generalized_statements=requested.generalized_statements,
        max_name_table_size=min(names, defaults.max_name_table_size),
        max_prefix_table_size=min(requested.max_prefix_table_size or 150, defaults.max_prefix_table_size),
        max_datatype_table_size=min(requested.max_datatype_table_size or 32, defaults.max_datatype_table_size),
    )


__all__ = ["MIN_NAME_TABLE", "negotiate_patch"]
