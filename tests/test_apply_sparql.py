"""``sparql+http(s)://`` targets against the real Oxigraph server and Virtuoso (tests/sparql_helpers.py):
the URL, the state the target leaves, the CLI commands, refusals and faults.

The exactly-once properties (differential against the memory target, two appliers, kill -9)
are in tests/test_sparql_exactly_once.py. Specs:
- SPARQL 1.1 Update §3.1.1/§3.1.2 (INSERT DATA/DELETE DATA), §3.2.2 (DROP GRAPH fails on a
  missing graph unless SILENT): https://www.w3.org/TR/sparql11-update/
- RDF 1.1 Concepts §3.5, skolem IRIs: https://www.w3.org/TR/rdf11-concepts/#section-skolemization
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget
from patchsync.apply.registry import open_target
from patchsync.apply.targets.sparql import SparqlTarget
from patchsync.apply.targets.sparql.config import DEFAULT_GENID, parse_url
from patchsync.errors import ApplyError, PatchsyncError, TargetUnavailable, UsageError, is_transient

from .apply_helpers import apply_text, rdfp_to_jellyp, reference, state
from .nats_helpers import free_port
from .sparql_helpers import quads

PATCHSYNC = [sys.executable, "-m", "patchsync"]
S, P, O = "<http://e/s>", "<http://e/p>", "<http://e/o>"  # noqa: E741
LOG = (
    f'H id <urn:1> .\nA {S} {P} "v" .\nA _:b1 {P} "w"@en <http://e/g> .\n'
    f'TX .\nA {S} {P} "x" .\nD {S} {P} "v" .\nTC .\nTX .\nA {S} {P} "z" .\nTA .\n'
    f"PA ex <http://e/> .\n"
)


def url(server: Any, **options: str) -> str:
    layout = server.name
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    return f"sparql+http://127.0.0.1:{server.http_port}?layout={layout}{extra}"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PATCHSYNC, *args], capture_output=True, text=True, timeout=600, env=env)


# -- the URL (no server) -------------------------------------------------------------------------


def test_layouts_name_the_usual_endpoints() -> None:
    fuseki = parse_url("sparql+http://h:3030/ds?layout=fuseki")
    assert (fuseki.query, fuseki.update, fuseki.store) == (
        "http://h:3030/ds/sparql",
        "http://h:3030/ds/update",
        "http://h:3030/ds/data",
    )
    ox = parse_url("sparql+https://h:7878?layout=oxigraph&update=/u")
    assert (ox.query, ox.update, ox.store, ox.star) == (
        "https://h:7878/query",
        "https://h:7878/u",
        "https://h:7878/store",
        "rdf12",
    )
    virt = parse_url("sparql+http://h:8890?layout=virtuoso")
    assert virt.default_graph == "urn:x-patchsync:default" and virt.star == "refuse"
    plain = parse_url("sparql+http://h/ds")
    assert (plain.query, plain.update, plain.store, plain.genid) == ("http://h/ds", "http://h/ds", None, DEFAULT_GENID)


def test_credentials_in_the_url_are_refused_without_being_shown() -> None:
    with pytest.raises(UsageError) as caught:
        open_target("sparql+http://admin:s3cret@h:7878?layout=oxigraph")
    assert "s3cret" not in str(caught.value) and "admin" not in str(caught.value)
    assert "password-file" in str(caught.value)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("layout=jena", "unknown layout"),
        ("colour=red", "unknown option"),
        ("bnodes=keep", "bnodes="),
        ("timeout=soon", "timeout="),
        ("user=u", "needs both"),
        ("token-env=PATCHSYNC_NO_SUCH_VARIABLE", "is not set"),
        # RDF 1.2 Turtle §2.4 (https://www.w3.org/TR/rdf12-turtle/#reifying-triples): on the
        # Oxigraph server << s p o >> is a reifier minted per write, not a quoted triple.
        ("layout=oxigraph&star=rdfstar", "new blank reifier"),
    ],
)
def test_bad_options_are_one_line(query: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as caught:
        parse_url(f"sparql+http://h:1?{query}")
    assert "\n" not in str(caught.value)


def test_credentials_come_from_a_file_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pw").write_text("s3cret\n")
    basic = parse_url(f"sparql+http://h:1?user=u&password-file={tmp_path / 'pw'}")
    assert basic.authorization == "Basic dTpzM2NyZXQ="  # base64("u:s3cret"), RFC 7617 §2
    monkeypatch.setenv("PS_TOKEN", "tok")
    bearer = parse_url("sparql+http://h:1?token-env=PS_TOKEN")
    assert bearer.authorization == "Bearer tok"
    assert "tok" not in repr(bearer) and "s3cret" not in repr(basic)


# -- against the stores ----------------------------------------------------------------------------


def test_apply_dump_status_and_resume(sparql_server: Any) -> None:
    target = open_target(url(sparql_server))
    result = apply_text(LOG, target)
    expected = apply_text(LOG, MemoryTarget())
    assert (result.units, result.aborted, result.added, result.deleted, result.noop) == (
        expected.units,
        expected.aborted,
        expected.added,
        expected.deleted,
        expected.noop,
    )
    assert state(target)[0] == reference(LOG)[0]
    assert target.head() == "urn:1"
    [status] = target.sources()
    assert (status.source, status.checkpoint.patches, status.checkpoint.last_id) == ("log", 1, "urn:1")
    again = apply_text(LOG, target)
    assert (again.units, again.added) == (0, 0)
    # The blank node is a skolem IRI in the store (RDF 1.1 §3.5), a blank node in the dump.
    stored = quads(sparql_server.endpoints, ["http://e/g"])
    assert stored == {(f"<{DEFAULT_GENID}b1>", P, '"w"@en', "<http://e/g>")}
    # A later patch deletes it by its label: the same IRI.
    apply_text(f'H id <urn:2> .\nH prev <urn:1> .\nD _:b1 {P} "w"@en <http://e/g> .\n', target, source="log2")
    assert state(target)[0] == {(S, P, '"x"', "")}
    assert target.head() == "urn:2"
    target.close()


def test_cli_apply_status_dump_snapshot_and_base(sparql_server: Any, tmp_path: Path) -> None:
    log = tmp_path / "a.rdfp"
    log.write_text(LOG)
    spec = url(sparql_server)
    done = cli("apply", str(log), "--target", spec, "--no-progress")
    assert done.returncode == 0, done.stderr
    status = cli("status", "--target", spec)
    assert status.returncode == 0 and "a.rdfp" in status.stdout, status.stderr
    dump = cli("dump", "--target", spec, "-o", str(tmp_path / "out.nq"))
    assert dump.returncode == 0, dump.stderr
    dumped = (tmp_path / "out.nq").read_text()
    assert '"x"' in dumped and "_:b1" in dumped and DEFAULT_GENID not in dumped
    snap = cli("snapshot", "--target", spec, "-o", str(tmp_path / "snap.jelly"))
    assert snap.returncode == 0, snap.stderr
    assert (tmp_path / "snap.jelly").stat().st_size > 0
    # Another state prefix is another replica's bookkeeping: none of this one's.
    other = open_target(url(sparql_server, state="urn:x-other"))
    assert other.sources() == [] and other.head() is None
    other.close()


def test_base_load_goes_through_the_graph_store(sparql_server: Any, tmp_path: Path) -> None:
    base = tmp_path / "base.nq"
    lines = [f'<http://e/s{i}> {P} "v{i}" <http://e/g{i % 3}> .' for i in range(3000)]
    lines += [f'_:n{i} {P} "d{i}" .' for i in range(1000)]
    base.write_text("\n".join(lines) + "\n")
    spec = url(sparql_server)
    (tmp_path / "none.rdfp").write_text("")
    done = cli("apply", "--base", str(base), "--target", spec, "--no-progress", str(tmp_path / "none.rdfp"))
    assert done.returncode == 0, done.stderr
    target = open_target(spec)
    got = state(target)[0]
    assert len(got) == 4000
    assert ("<http://e/s7>", P, '"v7"', "<http://e/g1>") in got and ("_:n5", P, '"d5"', "") in got
    target.close()


def test_refusals_are_one_line_naming_the_byte(sparql_server: Any) -> None:
    target = open_target(url(sparql_server, bnodes="refuse"))
    apply_text(f'A {S} {P} "ok" .\n', target)
    # Refused as the row is decoded (the target's term adapter), before its unit is written.
    with pytest.raises(PatchsyncError) as caught:
        apply_text(f'A {S} {P} "a" .\nA _:b {P} "b" .\n', target, source="b")
    assert "_:b" in str(caught.value) and "bnodes=refuse" in str(caught.value), caught.value
    assert "\n" not in str(caught.value)
    assert state(target)[0] == {(S, P, '"ok"', "")}
    target.close()


REFUSED_BNODE = f'H id <urn:1> .\nTX .\nA {S} {P} "a" .\nTC .\nZ .\nH id <urn:2> .\nH prev <urn:1> .\nTX .\nA {O} {P} "c" .\nA _:b {P} "b" .\nTC .\n'


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_a_refused_blank_node_names_the_log_and_its_rows_byte(oxigraph_server: Any, tmp_path: Path, fmt: str) -> None:
    """The line names the row holding the blank node (not the event before it), and every unit
    before that row is applied: the decoder attaches the row's position to the adapter's
    refusal, as to any term an adapter rejects."""
    log = tmp_path / f"b.{fmt}"
    log.write_bytes(REFUSED_BNODE.encode() if fmt == "rdfp" else rdfp_to_jellyp(REFUSED_BNODE))
    # The text row: its line's byte and number; a Jelly row: its frame's byte, the frame, its index.
    where = {"rdfp": "byte 134, line 10: term", "jellyp": "byte 108, frame 1, row 6: blank node"}[fmt]
    done = cli("apply", str(log), "--target", url(oxigraph_server, bnodes="refuse"), "--no-progress")
    assert done.returncode == 1
    assert done.stderr == (
        f"patchsync: {log}, {where} rejected by the term adapter: "
        "blank node _:b: this SPARQL target is set to bnodes=refuse\n"
    )
    target = open_target(url(oxigraph_server))
    assert state(target)[0] == {(S, P, '"a"', "")}  # the first patch, and nothing of the second
    assert target.head() == "urn:1"
    target.close()


def test_tail_stops_at_a_refused_row_in_the_same_line(oxigraph_server: Any, tmp_path: Path) -> None:
    """The daemon's last line is the refusal ``apply`` prints; the patch before it is applied."""
    log = tmp_path / "b.jellyp"
    log.write_bytes(rdfp_to_jellyp(REFUSED_BNODE))
    spec = url(oxigraph_server, bnodes="refuse")
    done = cli("tail", str(log), "--target", spec, "--once", "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"patchsync: {log}, byte 108, frame 1, row 6: blank node rejected by the term adapter: "
        "blank node _:b: this SPARQL target is set to bnodes=refuse"
    )
    target = open_target(spec)
    assert state(target)[0] == {(S, P, '"a"', "")} and target.head() == "urn:1"
    target.close()


STAR_PATCHES = (
    f'H id <urn:1> .\nTX .\nA {S} {P} "a" .\nTC .\nZ .\n'
    f'H id <urn:2> .\nH prev <urn:1> .\nTX .\nA {O} {P} "c" .\nA {S} {P} << {S} {P} {O} >> .\nTC .\n'
)


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_rdf_star_is_refused_where_the_store_takes_none(virtuoso_server: Any, tmp_path: Path, fmt: str) -> None:
    """Virtuoso takes no quoted triple (tests/test_sparql_servers.py): a patch holding one is
    refused in one line naming the log and the row, and nothing of its unit is applied."""
    log = tmp_path / f"star.{fmt}"
    log.write_bytes(STAR_PATCHES.encode() if fmt == "rdfp" else rdfp_to_jellyp(STAR_PATCHES))
    spec = url(virtuoso_server)
    done = cli("apply", str(log), "--target", spec, "--no-progress")
    where = {"rdfp": "byte 134, line 10: term", "jellyp": "byte 108, frame 1, row 6: quoted triple"}[fmt]
    assert done.stderr == (
        f"patchsync: {log}, {where} rejected by the term adapter: "
        "an RDF-star quoted triple: this SPARQL store takes none (star=refuse)\n"
    )
    target = open_target(spec)
    assert state(target)[0] == {(S, P, '"a"', "")} and target.head() == "urn:1"
    target.close()


def test_rdf12_triple_terms_as_objects_on_oxigraph(oxigraph_server: Any) -> None:
    target = open_target(url(oxigraph_server))
    text = f"A {S} {P} << {S} {P} {O} >> .\n"
    apply_text(text, target)
    assert state(target)[0] == reference(text)[0]
    with pytest.raises(ApplyError, match=r"RDF 1\.2"):
        apply_text(f"A << {S} {P} {O} >> {P} {O} .\n", target, source="b")
    target.close()


STAR_LOG = (
    f'H id <urn:1> .\nTX .\nA {S} {P} << {S} {P} "x"@en >> .\nA {S} {P} << _:b {P} {O} >> <http://e/g> .\n'
    f"A {O} {P} << {S} {P} << {O} {P} {S} >> >> .\nA {S} {P} << {S} {P} {O} >> .\nTC .\nZ .\n"
    f"H id <urn:2> .\nH prev <urn:1> .\nTX .\nD {S} {P} << {S} {P} {O} >> .\n"
    f'A {S} {P} << {S} {P} "x"@en >> .\nD {S} {P} << {S} {P} "y" >> .\nTC .\n'
)


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_quoted_triples_round_trip_on_oxigraph(oxigraph_server: Any, fmt: str) -> None:
    """RDF-star quoted triples as objects (nested, with a literal, a blank node, in a named
    graph), added, deleted and added again: the store's dump equals the memory target's, and
    so do the counts (a quoted triple already there is a no-op). Written as RDF 1.2 triple
    terms: https://www.w3.org/TR/rdf12-concepts/#section-triple-terms."""
    target = open_target(url(oxigraph_server))
    result = apply_text(STAR_LOG, target, fmt=fmt)
    expected = apply_text(STAR_LOG, MemoryTarget(), fmt=fmt)
    assert (result.added, result.deleted, result.noop) == (expected.added, expected.deleted, expected.noop)
    assert state(target)[0] == reference(STAR_LOG, fmt=fmt)[0]
    assert target.head() == "urn:2"
    target.close()


def test_a_store_refusing_an_update_names_the_unit_and_its_message(sparql_server: Any) -> None:
    target = open_target(url(sparql_server))
    apply_text(f'A {S} {P} "ok" .\n', target)
    # An IRI with a space written as \u0020: N-Triples takes the escape, the store refuses the IRI.
    bad = f'TX .\nA {S} {P} "a" .\nTC .\nTX .\nA <http://e/a\\u0020b> {P} "b" .\nTC .\n'
    with pytest.raises(ApplyError) as caught:
        apply_text(bad, target, source="b")
    message = str(caught.value)
    assert "\n" not in message and "HTTP 400" in message and "byte" in message, message
    # Nothing of the refused group is applied, and the log resumes before it.
    assert state(target)[0] == {(S, P, '"ok"', "")}
    target.close()


def test_wrong_endpoint_names_the_url_and_the_status(oxigraph_server: Any) -> None:
    spec = f"sparql+http://127.0.0.1:{oxigraph_server.http_port}/nowhere?query=/nope&update=/nope"
    with pytest.raises(ApplyError) as caught:
        open_target(spec)
    message = str(caught.value)
    assert (
        f"127.0.0.1:{oxigraph_server.http_port}" in message
        and "/nowhere/nope" in message
        and "404" in message
        and "\n" not in message
    )
    assert not is_transient(caught.value)


def test_store_down_is_transient_and_the_cli_gives_up_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    token = tmp_path / "token"
    token.write_text("very-secret-token")
    spec = f"sparql+http://127.0.0.1:{port}?layout=oxigraph&token-file={token}"
    with pytest.raises(TargetUnavailable) as caught:
        open_target(spec)
    assert is_transient(caught.value)
    log = tmp_path / "a.rdfp"
    log.write_text(LOG)
    done = cli("apply", str(log), "--target", spec, "--no-progress")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "does not answer" in done.stderr and "very-secret-token" not in done.stderr + done.stdout


def test_a_slow_store_times_out(tmp_path: Path) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections and never answers
    port = listener.getsockname()[1]
    try:
        with pytest.raises(TargetUnavailable, match="no answer in time"):
            SparqlTarget(f"sparql+http://127.0.0.1:{port}?layout=oxigraph&timeout=0.5")
    finally:
        listener.close()


def test_virtuoso_maps_the_default_graph(virtuoso_server: Any) -> None:
    target = open_target(url(virtuoso_server))
    apply_text(f'A {S} {P} "d" .\n', target)
    assert quads(virtuoso_server.endpoints, ["urn:x-patchsync:default"]) == {(S, P, '"d"', "<urn:x-patchsync:default>")}
    assert state(target)[0] == {(S, P, '"d"', "")}
    target.close()


def test_tail_once_keeps_the_store_in_step(sparql_server: Any, tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    log.write_bytes(rdfp_to_jellyp(LOG))
    spec = url(sparql_server)
    done = cli("tail", str(log), "--target", spec, "--once", "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 0, done.stderr
    target = open_target(spec)
    assert state(target)[0] == reference(LOG)[0]
    target.close()


def test_tail_once_gives_up_in_one_line_when_the_store_is_down(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    log.write_bytes(rdfp_to_jellyp(LOG))
    spec = f"sparql+http://127.0.0.1:{free_port()}?layout=oxigraph"
    args = ("tail", str(log), "--target", spec, "--once", "--state-dir", str(tmp_path / "state"))
    done = cli(*args, "--retry-timeout", "1")
    assert done.returncode != 0
    # Retried with backoff (one event a try), then one line giving up.
    assert "event=target_unavailable" in done.stderr and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("patchsync: ") and "does not answer" in last
