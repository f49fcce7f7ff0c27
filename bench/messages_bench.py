"""Message-mode N-Quads reading against rdflib parsing the same statements.

Run from the repository root::

    python -m bench.messages_bench [--messages N] [--repeat K]

The log: N small messages (an observation of 4 quads in its sensor's graph, one blank node,
typed and language-tagged literals) in N-Quads, each ended by a ``# @message`` line. Cases,
on the same bytes in the same run, best of K (default 1):

- ``patchsync``: :class:`patchsync.logs.messages.MessageReader` over the log, every message
  as a list of N-Triples quads (message boundaries kept);
- ``rdflib``: rdflib's N-Quads parser over the same text into a ``Dataset`` (it skips the
  delimiter comments: the same statements, no message boundaries), the baseline;
- ``rdflib per message``: rdflib parsing each message on its own (what message boundaries
  cost a reader that parses each message as a document).

Prints the table and PASS/FAIL against the target (patchsync at least 3x rdflib's rate).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

TARGET = 3.0


def message_texts(n: int) -> list[str]:
    """N observation messages in N-Quads, 4 quads each (shared with bench.ingest_bench)."""
    out = []
    for i in range(n):
        obs = f"<http://example.org/obs/{i}>"
        graph = f"<http://example.org/sensor/{i % 50}>"
        out.append(
            f'{obs} <http://www.w3.org/ns/sosa/resultTime> "2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"'
            f"^^<http://www.w3.org/2001/XMLSchema#dateTime> {graph} .\n"
            f'{obs} <http://www.w3.org/ns/sosa/hasSimpleResult> "{(i * 37) % 1000 / 10}"'
            f"^^<http://www.w3.org/2001/XMLSchema#double> {graph} .\n"
            f"{obs} <http://www.w3.org/ns/sosa/madeBySensor> _:sensor {graph} .\n"
            f'_:sensor <http://www.w3.org/2000/01/rdf-schema#label> "sensor {i % 50}"@en {graph} .\n'
        )
    return out


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--per-message-limit", type=int, default=20_000, help="messages parsed one by one by rdflib")
    args = parser.parse_args()
    from rdflib import Dataset

    from patchsync.logs.messages import MessageReader

    texts = message_texts(args.messages)
    data = "# @message\n".join(texts).encode()
    quads = sum(t.count("\n") for t in texts)

    def ours() -> int:
        return sum(len(m) for m in MessageReader(data, "nq", source="bench.nq"))

    def rdflib_whole() -> int:
        ds = Dataset()
        ds.parse(data=data.decode(), format="nquads")
        return len(ds)

    few = texts[: args.per_message_limit]

    def rdflib_each() -> int:
        count = 0
        for text in few:
            ds = Dataset()
            ds.parse(data=text, format="nquads")
            count += len(ds)
        return count

    rows = []
    seconds, got = best(ours, args.repeat)
    assert got == quads, (got, quads)
    rows.append(("patchsync MessageReader", args.messages, quads, seconds))
    seconds, got = best(rdflib_whole, args.repeat)
    rows.append(("rdflib N-Quads parser", args.messages, quads, seconds))
    seconds, got = best(rdflib_each, 1)
    rows.append(("rdflib per message", len(few), sum(t.count("\n") for t in few), seconds))
    print(f"{'case':26} {'messages':>9} {'quads':>9} {'seconds':>8} {'messages/s':>11} {'quads/s':>10}")
    for name, msgs, q, s in rows:
        print(f"{name:26} {msgs:>9} {q:>9} {s:>8.2f} {msgs / s:>11.0f} {q / s:>10.0f}")
    ratio = (rows[0][2] / rows[0][3]) / (rows[1][2] / rows[1][3])
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"patchsync / rdflib N-Quads parser: {ratio:.1f}x ({verdict}, target >= {TARGET:.0f}x)")


if __name__ == "__main__":
    main()
