"""The documentation is checked like code.

- Every command of the README's tour runs as written: the fenced blocks marked ``sh tour`` run in
  order, in one shell, with ``patchsync`` and ``python`` this checkout's, in a fresh folder and
  in one where ``make run``'s recipe ran first (the README says to take the tour after it).
  Blocks marked ``sh tour nats`` need NATS JetStream: skipped when it is unreachable, unless
  ``PATCHSYNC_REQUIRE_NATS=1`` (the ``nats_stream`` fixture decides, and gives the tour a
  stream of its own in place of ``demo``). The ``patchsync serve`` and Oxigraph server blocks'
  fixed ports are rewritten to free ones, and every process a block leaves behind is stopped with
  its shell. ``oxigraph`` is the one the ``dev`` extra installs (the README says so).
- Every relative link of README.md, CHANGELOG.md and docs/**/*.md resolves, ``#anchors`` included
  (GitHub's heading anchors).
- The README's command summary is ``patchsync --help``'s command list: the same commands, in the
  same order, with the same one-line descriptions; each command's ``--help`` works.
- The deploy recipes are valid: each systemd unit passes ``systemd-analyze verify`` (where
  systemd is installed) and a strict reading here, and its ``ExecStart`` parses with
  patchsync's own parser (``tail`` and ``serve``); the Containerfile's extras, copied paths and
  command are real.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from patchsync.cli.main import build_parser
from patchsync.errors import UsageError
from patchsync.serve.doors import DOORS
from patchsync.serve.settings import ServeSettings, parse_address
from patchsync.sources import APPEND, FOLLOW, SourceKind, address_forms, registry

from .docs_runner import STATES, prepare, run_shell
from .nats_helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEPLOY = ROOT / "deploy"

# -- the tour ---------------------------------------------------------------------------------

DEMO_STREAM = "nats://127.0.0.1:4222/demo"
# The serve and SPARQL blocks' ports, as the README prints them; the test runs them on free ones.
TOUR_PORTS = ("127.0.0.1:8710", "127.0.0.1:8711", "127.0.0.1:7878")


def tour_blocks() -> list[tuple[str, str]]:
    """``(tags, code)`` of every ```` ```sh tour ```` block of the README, in order."""
    return [
        (m.group(1).strip(), m.group(2))
        for m in re.finditer(r"^```sh tour([^\n]*)\n(.*?)^```", README.read_text(), re.M | re.S)
    ]


#: The states a reader starts the tour from (the README says to take it after ``make run``).
TOUR_STATES = STATES


@pytest.fixture(scope="module", params=TOUR_STATES)
def toured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, oxigraph_binary: str
) -> tuple[Path, str, str]:
    """A folder where the tour's blocks without NATS ran, what they printed, and the state they
    started from. The Oxigraph server is the one the ``dev`` extra installed beside this
    interpreter (where ``.venv/bin`` on a reader's PATH finds it)."""
    folder = prepare(tmp_path_factory.mktemp("tour"), request.param)
    code = "\n".join(block for tags, block in tour_blocks() if "nats" not in tags.split())
    for port in TOUR_PORTS:
        assert port in code
        code = code.replace(port, f"127.0.0.1:{free_port()}")
    return folder, run_shell(code, folder, str(Path(oxigraph_binary).parent)).stdout, request.param


def test_the_tour_has_apply_tail_and_a_stream_replica() -> None:
    blocks = tour_blocks()
    text = "\n".join(code for _, code in blocks)
    assert len(blocks) >= 3
    steps = ("patchsync apply", "patchsync tail", "patchsync publish", "nats://", "patchsync serve", "grpc://")
    for step in (*steps, "oxigraph serve", "sparql+http://"):
        assert step in text, step
    assert any("nats" in tags.split() for tags, _ in blocks)


def test_the_tours_oxigraph_comes_with_the_extra_the_readme_names() -> None:
    named = re.search(r"the Oxigraph server, which the\s+`(\w+)` extra installs", README.read_text())
    assert named is not None
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    # The PyPI package `oxigraph` is the server (`pyoxigraph` is the library).
    assert any(re.match(r"oxigraph\b", requirement) for requirement in extras[named.group(1)])


@pytest.mark.slow
def test_the_tour_runs(toured: tuple[Path, str, str]) -> None:
    folder, out, state = toured
    assert "the replica equals the log" in out and "the served replicas equal the log" in out
    assert "the SPARQL store equals the log" in out
    assert (folder / "out" / "library.db").exists() and (folder / "out" / "replica.db").exists()
    assert (folder / "out" / "serve.txt").read_text().splitlines()[-1] == "stopped"  # SIGTERM: a clean stop
    # The producer wrote 300 then 100 patches after those there were: none, or make run's 500.
    before = 500 if state == "after make run" else 0
    assert f"urn:patch:{before + 400}" in out.splitlines()  # the second run's last id
    status = json.loads(
        subprocess.run(
            [sys.executable, "-m", "patchsync", "status", "--json", "--target", "sqlite:///out/replica.db"],
            cwd=folder, capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    assert sum(row["patches"] for row in status["sources"]) == before + 400
    assert all(row["tail"]["running"] is False for row in status["sources"])  # no daemon left behind


@pytest.mark.slow
def test_the_tour_over_nats_runs(toured: tuple[Path, str, str], nats_stream: str) -> None:
    folder, _, _ = toured
    code = "\n".join(block for tags, block in tour_blocks() if "nats" in tags.split())
    assert DEMO_STREAM in code
    run_shell(code.replace(DEMO_STREAM, nats_stream), folder)
    dumps = []
    for db in ("stream-replica", "third", "replica"):
        out = subprocess.run(
            [sys.executable, "-m", "patchsync", "dump", "--target", f"sqlite:///out/{db}.db"],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        dumps.append(sorted(out.splitlines()))
    # The stream holds the tailed segments: both stream replicas equal the file replica.
    assert dumps[0] and dumps[0] == dumps[1] == dumps[2]


# -- links ------------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose(text: str) -> str:
    """``text`` without fenced code blocks, inline code and HTML comments (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for ``page``'s headings (duplicates get -1, -2, ...)."""
    found: set[str] = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def test_anchor_spelling_is_githubs(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# A `b` c\n## Jena's RDF Binary\n## Across machines: NATS JetStream\n## x\n## x\n")
    assert anchors(page) == {"a-b-c", "jenas-rdf-binary", "across-machines-nats-jetstream", "x", "x-1"}


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_benchmarks_page_names_no_path_of_the_machine_that_made_it() -> None:
    # bench/__main__.py writes a path in the repository relative to it, a scratch file by name.
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    absolute = re.findall(r"(?<![\w.:/~$-])/(?:[\w.+-]+/)+[\w.+-]*", page)
    assert not absolute, absolute


# -- the command summary ----------------------------------------------------------------------


def help_commands() -> list[tuple[str, str]]:
    """``(command, one-line help)`` as ``patchsync --help`` lists them."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # argparse keeps the subcommands here
    return [(a.dest, " ".join((a.help or "").split())) for a in sub._get_subactions()]


def readme_commands() -> list[tuple[str, str]]:
    section = README.read_text().split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `patchsync ([a-z-]+)` \| (.+?) \|$", section, re.M)


def test_the_command_summary_is_the_help() -> None:
    assert readme_commands() == help_commands()


def test_help_lists_the_commands_the_summary_does() -> None:
    shown = subprocess.run([sys.executable, "-m", "patchsync", "--help"], capture_output=True, text=True, check=True)
    for name, _ in readme_commands():
        assert re.search(rf"^    {re.escape(name)}\b", shown.stdout, re.M), name


@pytest.mark.parametrize("command", [name for name, _ in help_commands()])
def test_each_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    assert f"usage: patchsync {command}" in " ".join(capsys.readouterr().out.split())


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return dict(sub.choices)


def test_every_option_with_a_default_says_it() -> None:
    # A default the help does not show is a default the user has to guess (or read the code for).
    silent = [
        f"{name} {action.option_strings[0]} (default {action.default!r})"
        for name, parser in command_parsers().items()
        for action in parser._actions
        if action.option_strings
        and action.default not in (None, False, [], argparse.SUPPRESS)
        and "default" not in (action.help or "")
    ]
    assert not silent, silent


def shown_help(command: str) -> str:
    return " ".join(command_parsers()[command].format_help().split())


@pytest.mark.parametrize(("command", "capability"), [("tail", FOLLOW), ("publish", APPEND), ("ingest", APPEND)])
def test_help_lists_the_source_kinds_the_registry_holds(
    command: str, capability: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    forms = address_forms(capability)
    assert {"grpc://HOST:PORT/TOPIC", "http://HOST:PORT/NAME", "nats://HOST:PORT/STREAM"} <= set(forms)
    assert all(form in shown_help(command) for form in forms), shown_help(command)
    # Not written by hand: a kind registered is a kind the help names.
    extra = SourceKind("demo", frozenset({FOLLOW, APPEND}), scheme="demo", form="demo://HOST/LOG")
    monkeypatch.setitem(registry._SCHEMES, "demo", extra)
    assert "demo://HOST/LOG" in shown_help(command)


def test_serve_without_a_listener_names_every_door() -> None:
    with pytest.raises(UsageError) as refused:
        ServeSettings(listeners={}, topics=("a=x",)).check()
    assert all(f"{kind.flag} HOST:PORT" in str(refused.value) for kind in DOORS.values())
    assert "--http HOST:PORT" in str(refused.value)


def test_every_environment_variable_is_documented() -> None:
    # The variables patchsync reads, as string literals in its code, each named in the guides
    # or the README, and the client ones in the help of the flags that set them.
    read = {
        name
        for path in (ROOT / "patchsync").rglob("*.py")
        for name in re.findall(r"[\"'](PATCHSYNC_[A-Z_]+)[\"']", path.read_text())
    }
    assert {"PATCHSYNC_PURE", "PATCHSYNC_TOKEN", "PATCHSYNC_TLS_CA"} <= read
    docs = "\n".join(page.read_text() for page in pages())
    assert not [name for name in sorted(read) if not re.search(rf"\b{name}\b", docs)]
    for command in ("tail", "publish", "apply"):
        assert "PATCHSYNC_TOKEN" in shown_help(command) and "PATCHSYNC_TLS_CA" in shown_help(command)


# -- deploy/ ----------------------------------------------------------------------------------

UNITS = ("patchsync-tail.service", "patchsync-serve.service")
UNIT_KEYS = {
    "Unit": {"Description", "Documentation", "After", "Before", "Wants", "Requires", "BindsTo"},
    "Service": {
        "Type", "User", "Group", "StateDirectory", "ConfigurationDirectory", "CacheDirectory", "WorkingDirectory", "ExecStart", "KillSignal",
        "TimeoutStopSec", "Restart", "RestartSec", "RestartPreventExitStatus", "NoNewPrivileges",
        "ProtectSystem", "ProtectHome", "PrivateTmp", "Environment", "EnvironmentFile",
    },
    "Install": {"WantedBy"},
}  # fmt: skip


def read_unit(path: Path) -> dict[str, dict[str, str]]:
    """A strict reading: known sections and keys only, each key once, no continuation lines."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith(("#", ";")):
            continue
        assert not line.endswith("\\"), f"{path.name}:{n}: continuation lines are not used here"
        if m := re.fullmatch(r"\[(\w+)\]", line):
            assert m.group(1) in UNIT_KEYS and m.group(1) not in sections, f"{path.name}:{n}: section {line}"
            current = sections.setdefault(m.group(1), {})
            continue
        key, sep, value = line.partition("=")
        assert current is not None and sep, f"{path.name}:{n}: not a key=value line in a section"
        section = next(s for s, keys in sections.items() if keys is current)
        assert key in UNIT_KEYS[section], f"{path.name}:{n}: unexpected key {key} in [{section}]"
        assert key not in current, f"{path.name}:{n}: {key} given twice"
        current[key] = value
    return sections


def unit_command(name: str) -> tuple[dict[str, dict[str, str]], argparse.Namespace, str]:
    """A unit's sections, its ``ExecStart`` parsed by patchsync's parser, and its state directory.

    What every unit here shares is checked too: an absolute ``patchsync``, SIGTERM for a clean
    stop, no restart after a usage error (exit 2), started with the machine.
    """
    unit = read_unit(DEPLOY / name)
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].startswith("/") and Path(argv[0]).name == "patchsync"
    assert service["KillSignal"] == "SIGTERM" and service["RestartPreventExitStatus"] == "2"
    assert service["ProtectSystem"] == "strict"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    return unit, build_parser().parse_args(argv[1:]), f"/var/lib/{service['StateDirectory']}"


def test_the_systemd_unit_runs_a_valid_tail() -> None:
    _, args, state = unit_command("patchsync-tail.service")
    assert args.command == "tail" and args.paths and args.state_dir
    # ProtectSystem=strict leaves only the state directory writable: everything written is in it.
    for path in [*args.paths, args.state_dir, args.target.removeprefix("sqlite:///")]:
        assert path.startswith(state + "/"), path


def test_the_systemd_unit_runs_a_valid_serve() -> None:
    unit, args, state = unit_command("patchsync-serve.service")
    assert args.command == "serve" and args.topic and args.log_root
    # Log topics and --log-root are written: in the state directory, as for tail.
    topics = [spec.partition("=")[2] for spec in args.topic]
    for path in [*topics, args.log_root]:
        assert path.startswith(state + "/"), path
    # NATS topics' id indexes are a cache: in the cache directory.
    assert args.index_dir.startswith(f"/var/cache/{unit['Service']['CacheDirectory']}/"), args.index_dir
    # Credentials are read only, from the configuration directory.
    config = f"/etc/{unit['Service']['ConfigurationDirectory']}"
    for path in (args.tokens, args.tls_cert, args.tls_key):
        assert path and path.startswith(config + "/"), path
    # Listening beyond loopback needs tokens (the server refuses to start otherwise) and here TLS.
    listeners = [parse_address(a) for a in (args.door_grpc, args.door_http, args.metrics) if a]
    assert any(not a.is_loopback for a in listeners) and args.tokens and args.tls_cert
    assert parse_address(args.metrics).is_loopback  # --metrics asks for no token


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("name", UNITS)
def test_systemd_analyze_verifies_the_unit(tmp_path: Path, name: str) -> None:
    # verify checks that ExecStart's program exists: point it at this installation's.
    installed = Path(sys.executable).parent / "patchsync"
    if not installed.exists():
        pytest.skip(f"no patchsync script beside {sys.executable}")
    text = (DEPLOY / name).read_text().replace("/opt/patchsync/bin/patchsync", str(installed))
    unit = tmp_path / name
    unit.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def containerfile() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of deploy/Containerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Containerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0], line.split(None, 1)[1]) for line in lines]


def test_the_containerfile_commands_are_real() -> None:
    steps = containerfile()
    kinds = [kind for kind, _ in steps]
    assert kinds[0] == "FROM" and all(
        k in {"FROM", "RUN", "WORKDIR", "COPY", "USER", "VOLUME", "STOPSIGNAL", "ENTRYPOINT", "CMD"} for k in kinds
    )
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = False
    for kind, args in steps:
        if kind == "COPY":
            for source in shlex.split(args)[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        if kind == "RUN":
            for command in re.split(r"&&", args):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    spec = next(w for w in words if "[" in w)
                    wanted = set(spec[spec.index("[") + 1 : spec.index("]")].split(","))
                    assert wanted <= extras.keys(), f"unknown extras {wanted - extras.keys()}"
                    installed = True
                if words and words[0] == "patchsync":
                    with pytest.raises(SystemExit) as done:
                        build_parser().parse_args(words[1:])
                    assert done.value.code == 0  # --version
    assert installed
    assert dict(steps)["USER"] != "root" and dict(steps)["STOPSIGNAL"] == "SIGTERM"
    entry = json.loads(dict(steps)["ENTRYPOINT"])
    command = json.loads(dict(steps)["CMD"])
    assert entry == ["patchsync"]
    args = build_parser().parse_args(command)
    assert args.command == "tail" and args.state_dir
    volume = json.loads(dict(steps)["VOLUME"])[0]
    for path in [*args.paths, args.state_dir, args.target.removeprefix("sqlite:///")]:
        assert path.startswith(volume + "/"), path
