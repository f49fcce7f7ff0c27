"""SQL dialects as strategies (patchsync/apply/targets/sql/dialects): chosen once from the
URL, and the only place that knows which database it talks to.

The rest of the SQL target (target, terms, quad writes, ledger, namespaces, bulk, engine,
migrations) asks its dialect object; a test of a dialect's name there (``dialect ==``,
``name in (...)``, a table keyed on names) is refused here, read from the source.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url

from patchsync.apply.targets.sql import SqlTarget, create_sql_engine
from patchsync.apply.targets.sql.dialects import DIALECTS, dialect_for_url, dialect_of
from patchsync.apply.targets.sql.dialects.postgres import PostgresDialect
from patchsync.apply.targets.sql.dialects.sqlite import SqliteDialect
from patchsync.apply.targets.sql.ledger import Ledger
from patchsync.apply.targets.sql.namespaces import Namespaces
from patchsync.apply.targets.sql.quad_writes import QuadWrites
from patchsync.apply.targets.sql.statements import POSTGRESQL, SQLITE
from patchsync.apply.targets.sql.terms import TermDictionary
from patchsync.errors import UsageError

SQL = Path(__file__).resolve().parents[1] / "patchsync" / "apply" / "targets" / "sql"
#: Names a dialect goes by (SQLAlchemy's, and the short one people write).
NAMES = frozenset({"sqlite", "postgresql", "postgres", "pg"})


def _mentions_dialect(node: ast.AST) -> bool:
    """Whether an expression reads a dialect's name: ``x.dialect``, ``dialect``,
    ``url.get_backend_name()``, ``x.drivername`` or a dialect name as text."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and "dialect" in sub.id.lower():
            return True
        if isinstance(sub, ast.Attribute) and (
            "dialect" in sub.attr.lower() or sub.attr in ("get_backend_name", "drivername")
        ):
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.lower() in NAMES:
            return True
    return False


def dialect_branches(source: str, filename: str = "<source>") -> list[str]:
    """Each place in ``source`` that decides by a dialect's name: a comparison or membership
    test involving one, a dict keyed on dialect names, a subscript by one."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in node.ops
        ):
            if any(_mentions_dialect(side) for side in [node.left, *node.comparators]):
                found.append(f"{where}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if NAMES & {k.lower() for k in keys}:
                found.append(f"{where}: a table keyed on dialect names")
        elif isinstance(node, ast.Subscript) and _mentions_dialect(node.slice):
            found.append(f"{where}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and _mentions_dialect(node):
            found.append(f"{where}: match on a dialect")
    return found


def _shared_modules() -> list[Path]:
    return sorted(p for p in SQL.rglob("*.py") if "dialects" not in p.relative_to(SQL).parts)


def test_the_shared_modules_are_read() -> None:
    names = {p.name for p in _shared_modules()}
    assert {"target.py", "terms.py", "ledger.py", "namespaces.py", "statements.py", "engine.py"} <= names
    assert "sqlite.py" not in names and "postgres.py" not in names


@pytest.mark.parametrize("path", _shared_modules(), ids=lambda p: str(p.relative_to(SQL)))
def test_no_module_outside_the_dialects_decides_by_a_dialect_name(path: Path) -> None:
    assert dialect_branches(path.read_text(), path.name) == []


@pytest.mark.parametrize(
    "source",
    [
        'if self.dialect == "postgresql":\n    pass\n',
        'if self.dialect != "postgresql":\n    pass\n',
        'x = engine.dialect.name == "sqlite"\n',
        'if connection.dialect.name in ("postgresql",):\n    pass\n',
        'if url.get_backend_name() != "sqlite":\n    pass\n',
        'if name == "postgresql":\n    pass\n',
        '_SECONDARY = {"sqlite": "a", "postgresql": "b"}\n',
        "q = _SECONDARY[self.dialect]\n",
        'mark = "%s" if self.dialect == "postgresql" else "?"\n',
    ],
)
def test_the_scan_finds_each_form_of_branch(source: str) -> None:
    # Each of these forms was in the SQL target before the dialects were strategies.
    assert dialect_branches(source) != []


def test_the_scan_lets_strategy_calls_through() -> None:
    source = "self.dialect.lock_target(cursor)\nsql = self.dialect.statements.insert_quads\nx = a == b\n"
    assert dialect_branches(source) == []


def test_a_dialect_is_chosen_by_the_urls_backend_whatever_its_driver() -> None:
    assert isinstance(dialect_for_url(make_url("sqlite:///state.db")), SqliteDialect)
    assert isinstance(dialect_for_url(make_url("sqlite+pysqlite:///state.db")), SqliteDialect)
    assert isinstance(dialect_for_url(make_url("postgresql+psycopg://u@h/db")), PostgresDialect)
    assert isinstance(dialect_for_url(make_url("postgresql://u@h/db")), PostgresDialect)
    # One object per dialect: choosing again gives the same strategy.
    assert dialect_for_url(make_url("sqlite://")) is DIALECTS["sqlite"]


def test_each_dialect_holds_its_column_of_the_statement_table() -> None:
    assert DIALECTS["sqlite"].statements is SQLITE and DIALECTS["postgresql"].statements is POSTGRESQL
    for name, dialect in DIALECTS.items():
        assert dialect.name == name == dialect.statements.dialect


def test_the_registry_names_are_sqlalchemys() -> None:
    engine = create_engine("sqlite://")
    try:
        assert engine.dialect.name in DIALECTS and dialect_of(engine) is DIALECTS["sqlite"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("url", ["mysql://user:secret@db.example/state", "oracle://user:secret@db.example/state"])
def test_an_unsupported_database_is_one_line_naming_the_url(url: str) -> None:
    # Refused from the URL alone, before any driver is loaded (none of these is installed).
    for open_it in (create_sql_engine, SqlTarget):
        with pytest.raises(UsageError) as err:
            open_it(url)
        message = str(err.value)
        assert "\n" not in message
        assert "db.example/state" in message and "secret" not in message  # the URL, password hidden
        assert f"unsupported database {make_url(url).get_backend_name()!r}" in message
        assert "SQLite and PostgreSQL" in message


def test_the_term_dictionary_ledger_and_prefixes_are_parts_not_mixins(tmp_path: Path) -> None:
    for part in (TermDictionary, Ledger, Namespaces, QuadWrites):
        assert not issubclass(SqlTarget, part)
    with SqlTarget(f"sqlite:///{tmp_path / 's.db'}") as t:
        assert isinstance(t.dialect, SqliteDialect)
        assert isinstance(t.terms, TermDictionary) and t.writes.terms is t.terms
        assert isinstance(t.ledger, Ledger) and isinstance(t.prefixes, Namespaces)
        # One connection shared by the parts: what the target holds, they see.
        assert t.terms.link is t.link is t.ledger.link is t.writes.link
