"""The source registry (patchsync.sources): one place decides what a source name is."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchsync.errors import UsageError
from patchsync.sources import (
    APPEND,
    DIRECTORY,
    FILE,
    FOLLOW,
    SourceKind,
    is_address,
    log_files,
    register_source,
    resolve_source,
    source_schemes,
)
from patchsync.sources import registry as _registry
from patchsync.sources.roles import ROLES, Roles


def test_a_path_is_a_file_or_a_directory(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    assert resolve_source(log).kind is FILE
    assert resolve_source(log).log_files() == [log]  # a log not written yet is still a file source
    assert resolve_source(tmp_path).kind is DIRECTORY


def test_a_directory_stands_for_its_jellyp_files_by_name(tmp_path: Path) -> None:
    for name in ("patch-0000000002.jellyp", "patch-0000000001.JELLYP", "notes.txt", "x.rdfp"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.jellyp").mkdir()  # a directory named like a log is no log
    assert [p.name for p in resolve_source(tmp_path).log_files()] == [
        "patch-0000000001.JELLYP",
        "patch-0000000002.jellyp",
    ]


def test_log_files_keeps_order_and_leaves_addresses_out(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "b.jellyp").write_bytes(b"")
    one = tmp_path / "one.jellyp"
    assert log_files([one, "nats://127.0.0.1:4222/S", d]) == [one, d / "b.jellyp"]


def test_nats_addresses_are_parsed_once_and_malformed_ones_refused() -> None:
    src = resolve_source("nats://127.0.0.1:4222/patches")
    assert src.kind.name == "nats" and not src.is_path
    assert (src.address.host, src.address.port, src.address.stream) == ("127.0.0.1", 4222, "patches")
    assert src.kind.can(FOLLOW) and src.kind.can(APPEND)
    with pytest.raises(UsageError, match="names no stream"):
        resolve_source("nats://127.0.0.1:4222/")
    with pytest.raises(UsageError, match="an address, not a file"):
        _ = src.path


def test_an_unknown_scheme_is_refused_in_one_line_naming_the_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        resolve_source("kafka://broker/topic")
    message = str(info.value)
    assert "\n" not in message and "kafka://" in message and "nats://" in message
    assert is_address("kafka://broker/topic") and not is_address("logs/a.jellyp")
    assert not is_address("C:/logs/a.jellyp")  # no "//" after the colon: a path


def test_a_missing_capability_or_role_fails_with_its_name() -> None:
    register_source(SourceKind("ro", frozenset({FOLLOW}), scheme="ro"))
    try:
        src = resolve_source("ro://somewhere/x")
        assert src.require(FOLLOW, "tail") is src
        with pytest.raises(UsageError, match=r"publish cannot use a ro source \(it cannot append\)"):
            src.require(APPEND, "publish")
        with pytest.raises(UsageError, match="has no writer"):
            src.writer()
    finally:
        _registry._SCHEMES.pop("ro")


def test_registered_kinds_resolve_and_load_their_roles_lazily() -> None:
    kind = SourceKind(
        "echo",
        frozenset({FOLLOW}),
        scheme="echo",
        parse="urllib.parse:urlsplit",
        roles=Roles(connect="pathlib:PurePosixPath"),
    )
    register_source(kind)
    try:
        assert "echo" in source_schemes()
        src = resolve_source("ECHO://host/path")  # schemes are case-insensitive
        assert src.kind is kind and src.address.netloc == "host"
        assert getattr(src.connect(), "__name__", None) == "PurePosixPath"
    finally:
        _registry._SCHEMES.pop("echo")
    with pytest.raises(UsageError, match="needs a scheme"):
        register_source(SourceKind("nameless", frozenset()))
    with pytest.raises(UsageError, match="unknown capabilities"):
        register_source(SourceKind("odd", frozenset({"teleport"}), scheme="odd"))


def test_every_registered_role_loads() -> None:
    # A role naming a module or attribute that does not exist would only fail when used.
    for scheme in source_schemes():
        kind = _registry._SCHEMES[scheme]
        for role in ROLES:
            if not kind.roles.has(role):
                continue
            src = _registry.Source(kind, f"{scheme}://x/y", None)
            assert callable(getattr(src, role)()), (scheme, role)
