"""A command whose extra is not installed says which ``pip install 'patchsync[EXTRA]'`` is missing.

One table (``patchsync.errors.OPTIONAL_MODULES``) maps each optional module to its distribution
and extra; the registries' loaders (targets, source kinds) and the command line's last resort
turn a failed import of one of them into one line (exit 2), before a target is created. The
missing module is simulated in a fresh interpreter by a ``None`` entry in ``sys.modules``, which
makes ``import NAME`` fail as for a module that is not installed (and ``find_spec`` answer None).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from patchsync.errors import OPTIONAL_MODULES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "library.rdfp"
MESSAGES = Path(__file__).parent / "data" / "messages"
#: Runs ``python -m patchsync ARGS`` with the modules named in argv[1] (comma-separated) missing.
WITHOUT = (
    "import runpy, sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['patchsync', *sys.argv[2:]]\n"
    "runpy.run_module('patchsync', run_name='__main__')\n"
)


def extras() -> dict[str, set[str]]:
    """The distributions each extra of ``pyproject.toml`` installs, by normalized name."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {
        extra: {normal(re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0]) for req in reqs} for extra, reqs in table.items()
    }


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_each_optional_module_is_installed_by_the_extra_named() -> None:
    known = extras()
    for module, (distribution, extra) in OPTIONAL_MODULES.items():
        assert extra in known, f"{module}: no extra {extra!r} in pyproject.toml"
        assert normal(distribution) in known[extra], f"{module}: {distribution} is not in the {extra} extra"


def test_every_distribution_of_a_user_extra_is_in_the_table() -> None:
    named = {normal(distribution) for distribution, _ in OPTIONAL_MODULES.values()}
    for extra, distributions in extras().items():
        if extra == "dev":  # the tests' and benchmarks' tools: no command needs them
            continue
        for distribution in distributions:
            assert distribution in named, f"{distribution} ({extra}) has no module in OPTIONAL_MODULES"


def without(modules: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, modules, *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


#: (missing modules, the command, who the line names, the extra); {tmp} is a scratch folder.
CASES = [
    ("grpc", ["serve", "--listen", "127.0.0.1:0", "--topic", "a={tmp}/topic"], "patchsync serve --listen", "serve"),
    ("aiohttp", ["serve", "--http", "127.0.0.1:0", "--topic", "a={tmp}/topic"], "patchsync serve --http", "serve"),
    (
        "prometheus_client",
        ["tail", "{tmp}", "--metrics-listen", "127.0.0.1:0", "--once", "--target", "sqlite:///{tmp}/r.db"],
        "patchsync tail",
        "serve",
    ),
    ("grpc", ["tail", "grpc://127.0.0.1:1/x", "--once", "--target", "sqlite:///{tmp}/r.db"], "grpc://", "serve"),
    ("grpc", ["publish", str(EXAMPLE), "grpc://127.0.0.1:1/x"], "grpc://127.0.0.1:1/x", "serve"),
    ("nats", ["tail", "nats://127.0.0.1:1/x", "--once", "--target", "sqlite:///{tmp}/r.db"], "nats://", "nats"),
    ("nats", ["publish", str(EXAMPLE), "nats://127.0.0.1:1/x"], "nats://127.0.0.1:1/x", "nats"),
    (
        "psycopg",
        ["apply", str(EXAMPLE), "--target", "postgresql+psycopg://postgres@127.0.0.1:1/x"],
        "target 'postgresql+psycopg://postgres@127.0.0.1:1/x'",
        "postgres",
    ),
    ("sqlalchemy", ["apply", str(EXAMPLE), "--target", "sqlite:///{tmp}/r.db"], "target 'sqlite:///", "sql"),
    ("sqlalchemy", ["db", "upgrade", "sqlite:///{tmp}/r.db"], "patchsync db", "sql"),
    ("pyoxigraph", ["apply", str(EXAMPLE), "--target", "oxigraph:{tmp}/ox"], "an oxigraph: target", "oxigraph"),
    ("yaml", ["ingest", str(MESSAGES / "draft-products.yamlld"), "-o", "{tmp}/x.jellyp"], "YAML-LD", "yaml"),
    ("pyspark,pyarrow", ["spark-replay", str(EXAMPLE), "--out", "{tmp}/out"], "the Spark integration", "spark"),
]


@pytest.mark.parametrize(("modules", "args", "who", "extra"), CASES, ids=[f"{c[1][0]}-{c[0]}" for c in CASES])
def test_a_missing_extra_is_one_line_naming_it(
    tmp_path: Path, modules: str, args: list[str], who: str, extra: str
) -> None:
    done = without(modules, *(a.format(tmp=tmp_path) for a in args), cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"patchsync: {who}") and f"pip install 'patchsync[{extra}]'" in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # refused before anything was created


def test_the_library_raises_a_patchsync_error_too(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['sqlalchemy'] = None\n"
        "from patchsync import open_target\n"
        "from patchsync.errors import UsageError\n"
        "try:\n"
        f"    open_target('sqlite:///{tmp_path}/r.db')\n"
        "except UsageError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "needs SQLAlchemy, which is not installed: pip install 'patchsync[sql]'" in done.stdout, done.stderr
