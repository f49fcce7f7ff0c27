"""PostgreSQL's binary array format built by ``sql/pg_arrays`` (the write path's batches).

Each array goes to the real server and comes back as what PostgreSQL parsed: a wrong
length prefix, byte order, element oid or empty-array header is rejected by the server or
reads back different values.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from patchsync.apply.targets.sql.pg_arrays import bigint_array, key_arrays, register, text_array

LIMITS = [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31) - 1, 255, 256]


@pytest.fixture
def conn(pg_url: str) -> Any:
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    with psycopg.connect(host=url.host, port=url.port or 5432, user=url.username, dbname=url.database) as c:
        register(c)
        yield c


def test_bigint_arrays_read_back_as_sent(conn: Any) -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 3, 500, 5000):
        values = [rng.choice(LIMITS) if rng.random() < 0.2 else rng.randrange(-(2**63), 2**63) for _ in range(n)]
        assert conn.execute("SELECT %b::bigint[]", (bigint_array(values),)).fetchone()[0] == values


def test_text_arrays_read_back_as_sent(conn: Any) -> None:
    texts = [
        "",
        "<http://example.org/a>",
        '"quote \\" and backslash \\\\"@en',
        "line\nbreak\ttab",
        "é日本語🙂",
        "{braces},commas NULL",
        '"' + "long " * 3000 + '"',
        "<< <a> <b> <c> >>",
    ]
    for n in range(len(texts) + 1):
        assert conn.execute("SELECT %b::text[]", (text_array(texts[:n]),)).fetchone()[0] == texts[:n]


def test_key_arrays_unnest_row_by_row(conn: Any) -> None:
    keys = [(1, 2, 3, 4), (5, 6, 7, 8), (2**62, -5, 0, 1)]
    sql = "SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::bigint[], %b::bigint[])"
    assert conn.execute(sql, key_arrays(keys)).fetchall() == keys
    assert conn.execute(sql, key_arrays([])).fetchall() == []


def test_an_id_beyond_bigint_is_refused_before_sending() -> None:
    with pytest.raises(OverflowError):
        bigint_array([2**63])
