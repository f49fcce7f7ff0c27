"""SQL target specifics: migrations, locking between appliers, history, bulk paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from patchsync.apply import apply_events
from patchsync.apply.targets.sql import SqlTarget, current_revision, head_revision, upgrade_database
from patchsync.apply.targets.sql.migrate import upgrade
from patchsync.errors import ApplyError, SourceBusy

from .apply_helpers import apply_text, iri, reference, state

S, P = iri("s"), iri("p")


def test_empty_database_gets_the_schema(sql_url: str) -> None:
    with SqlTarget(sql_url) as t, t.engine.connect() as conn:
        assert current_revision(conn) == head_revision()
        tables = set(inspect(conn).get_table_names())
    assert {"ps_quads", "ps_namespaces", "ps_sources", "ps_patches"} <= tables


def test_previous_version_database_upgrades(sql_url: str) -> None:
    engine = create_engine(sql_url)
    with engine.begin() as conn:
        upgrade(conn, "0001")
        conn.exec_driver_sql("INSERT INTO ps_namespaces (g, prefix, iri) VALUES ('', 'ex', '<http://ex/>')")
    engine.dispose()
    with pytest.raises(ApplyError, match=r"revision 0001.*db upgrade"):
        SqlTarget(sql_url)
    before, after = upgrade_database(sql_url)
    assert (before, after) == ("0001", head_revision())
    with SqlTarget(sql_url) as t:
        assert t.namespaces() == {("", "ex"): "<http://ex/>"}
        apply_text(f"H id <urn:1> .\nA {S} {P} {iri('o')} .\n", t)
        assert [r.patch_id for r in t.history()] == ["urn:1"]
    assert upgrade_database(sql_url) == (head_revision(), head_revision())


def test_foreign_tables_without_version_are_refused(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE ps_quads (x int)")
    engine.dispose()
    with pytest.raises(ApplyError, match="no schema version"):
        SqlTarget(sqlite_url)


def test_history_keeps_headers_and_counts(sql_url: str) -> None:
    text = (
        f'H id <urn:1> .\nH creator "ann" .\nTX .\nA {S} {P} "x" .\nA {S} {P} "x" .\nTC .\nZ .\n'
        f'H id <urn:2> .\nH prev <urn:1> .\nD {S} {P} "x" .\nZ .\n'
    )
    with SqlTarget(sql_url) as t:
        apply_text(text, t)
        h = t.history()
    assert [(r.patch_id, r.prev, r.added, r.deleted, r.noop) for r in h] == [
        ("urn:1", None, 1, 0, 1),
        ("urn:2", "urn:1", 0, 1, 0),
    ]
    assert ("creator", '"ann"') in h[0].headers


def test_second_applier_of_a_source_is_locked_out(sql_url: str) -> None:
    first = SqlTarget(sql_url)
    second = SqlTarget(sql_url)
    try:
        apply_text(f"A {S} {P} {iri('1')} .\n", first)
        with pytest.raises(SourceBusy, match="another applier is applying log"):
            apply_text(f"A {S} {P} {iri('2')} .\n", second)
        # Another source is not blocked.
        apply_text(f"A {S} {P} {iri('3')} .\n", second, source="other")
    finally:
        first.close()
        second.close()
    with SqlTarget(sql_url) as t:
        assert state(t)[0] == {(S, P, iri("1"), ""), (S, P, iri("3"), "")}


def test_stale_checkpoint_is_detected_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from patchsync.apply import Applier
    from patchsync.apply.targets.sql import source_locks
    from patchsync.logs.patch_logs import iter_stream_events

    # Where the system has no open file description locks, no source lock is taken: the
    # checkpoint's version check guards alone.
    monkeypatch.setattr(source_locks, "_SETLK", None)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    text = f"A {S} {P} {iri('a')} .\n"
    a = SqlTarget(url)
    b = SqlTarget(url)
    try:
        late = Applier(b, source="log")  # reads "no checkpoint yet"
        apply_text(text, a)  # meanwhile another applier applies the source
        with pytest.raises(ApplyError, match="another applier moved the checkpoint"):
            late.apply(iter_stream_events(io.BytesIO(text.encode()), "rdfp", adapter=b.adapter, source="log"))
    finally:
        a.close()
        b.discard()
    with SqlTarget(url) as t:
        assert state(t)[0] == {(S, P, iri("a"), "")}
        assert t.checkpoint("log") is not None


def test_big_batches_use_the_bulk_path(sql_url: str) -> None:
    # Above the COPY threshold on PostgreSQL, with duplicates inside one batch.
    adds = "".join(f"A {S} {P} {iri(str(i % 700))} .\n" for i in range(1000))
    dels = "".join(f"D {S} {P} {iri(str(i % 350))} .\n" for i in range(700))
    text = f"TX .\n{adds}TC .\nTX .\n{dels}TC .\n"
    with SqlTarget(sql_url) as t:
        r = apply_text(text, t, batch_rows=1000)
        assert (r.added, r.deleted, r.noop) == (700, 350, 650)
        assert state(t) == reference(text)


def test_events_api_and_triples_in_default_graph(sql_url: str) -> None:
    from patchsync.events import Add, PatchEnd

    with SqlTarget(sql_url) as t:
        r = apply_events([Add(S, P, '"v"'), PatchEnd()], t, source="mem")
        assert r.added == 1
        assert list(t.quads()) == [(S, P, '"v"', "")]


def test_the_head_revision_constant_is_the_newest_migration() -> None:
    # migrate.HEAD_REVISION lets a target open without loading Alembic: it must name the
    # head of migrations/versions, or every open would take the slow path (or, were it
    # ahead, a database still to be upgraded could pass as current).
    from patchsync.apply.targets.sql.migrate import HEAD_REVISION

    assert head_revision() == HEAD_REVISION


def test_a_database_behind_the_head_is_refused_on_the_fast_path_too(sql_url: str) -> None:
    # The one-query check must not mistake an older revision for the head.
    engine = create_engine(sql_url)
    with engine.begin() as conn:
        upgrade(conn, "0002")
    engine.dispose()
    with pytest.raises(ApplyError, match=r"revision 0002.*db upgrade"):
        SqlTarget(sql_url)
