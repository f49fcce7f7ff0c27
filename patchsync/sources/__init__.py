"""Patch sources: the one registry that says what a source name is and what it can do.

A source is where patches come from or go to: a ``.jellyp``/``.rdfp`` log file, a directory
of log segments, or a network address (``nats://HOST:PORT/STREAM``). Every command and
library entry point resolves names here (:func:`resolve_source`); see
:mod:`patchsync.sources.registry`.
"""

from __future__ import annotations

from patchsync.sources.registry import (
    APPEND,
    CAPABILITIES,
    DIRECTORY,
    FILE,
    FOLLOW,
    LAG,
    LOG_SUFFIX,
    READ_AT,
    Source,
    SourceKind,
    address_forms,
    address_snapshot,
    directory_logs,
    is_address,
    log_files,
    register_source,
    resolve_source,
    resolve_sources,
    scheme_of,
    source_schemes,
)
from patchsync.sources.roles import Roles

__all__ = [
    "APPEND",
    "CAPABILITIES",
    "DIRECTORY",
    "FILE",
    "FOLLOW",
    "LAG",
    "LOG_SUFFIX",
    "READ_AT",
    "Roles",
    "Source",
    "SourceKind",
    "address_forms",
    "address_snapshot",
    "directory_logs",
    "is_address",
    "log_files",
    "register_source",
    "resolve_source",
    "resolve_sources",
    "scheme_of",
    "source_schemes",
]
