"""``ingest`` of N small RDF Messages into a ``.jellyp`` log and into a NATS stream.

Run from the repository root (the NATS cases need the server of tests/conftest.py,
``PATCHSYNC_NATS_URL``, default ``nats://127.0.0.1:4222``)::

    python -m bench.ingest_bench [--messages N] [--nats-messages M] [--no-nats]

The messages are those of :mod:`bench.messages_bench` (an observation of 4 quads in its
sensor's graph) in one N-Quads message log. Cases, in this order, on the same log:

- ``read only`` (baseline): the log read into messages, nothing written: what every
  ingest case pays before writing;
- ``add -> .jellyp`` and ``replace-graph -> .jellyp`` (the deletes from the log's replay,
  the new log here: an empty one);
- ``publish .jellyp -> NATS`` (baseline for the stream): the ``add`` log's patches
  published by :func:`patchsync.nats.publish_logs`, the same patches as the next case;
- ``add -> NATS``: ``ingest`` straight into a fresh stream;
- ``NATS -> SQLite``: the stream's patches applied into a fresh SQLite target (one applier).

The stream cases take the first M messages (default 10,000: every patch is one
acknowledged publish, so they run at the server round trip's pace, and the full N would
take many minutes on a loaded machine). Prints messages/s for each; every case is one timed
call, in this process.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path

from bench.messages_bench import message_texts

NATS_URL = os.environ.get("PATCHSYNC_NATS_URL", "nats://127.0.0.1:4222")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--nats-messages", type=int, default=10_000)
    parser.add_argument("--no-nats", action="store_true")
    args = parser.parse_args()
    from patchsync.ingest import ingest_messages
    from patchsync.logs.messages import MessageReader

    n = args.messages
    rows: list[tuple[str, int, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "messages.nq"
        source.write_text("# @message\n".join(message_texts(n)))

        def timed(name: str, fn: object, note: str = "", count: int = n) -> None:
            start = time.perf_counter()
            fn()  # type: ignore[operator]
            rows.append((name, count, time.perf_counter() - start, note))

        timed("read only", lambda: sum(1 for _ in MessageReader(source.read_bytes(), "nq")), "baseline")
        added = Path(tmp) / "add.jellyp"
        timed("add -> .jellyp", lambda: ingest_messages(added, [source], messages=True))
        replaced = Path(tmp) / "replace.jellyp"
        timed(
            "replace-graph -> .jellyp", lambda: ingest_messages(replaced, [source], mode="replace-graph", messages=True)
        )
        if not args.no_nats:
            import itertools

            from patchsync.apply.api import apply_events
            from patchsync.apply.registry import open_target
            from patchsync.nats import NatsLog, decode_message, publish_logs

            first = f"{NATS_URL}/bench_ingest_{uuid.uuid4().hex[:8]}"
            second = f"{NATS_URL}/bench_ingest_{uuid.uuid4().hex[:8]}"
            m = min(n, args.nats_messages)
            few = Path(tmp) / "few.nq"
            few.write_text("# @message\n".join(message_texts(m)))
            few_log = Path(tmp) / "few.jellyp"
            ingest_messages(few_log, [few], messages=True)
            try:
                timed("publish .jellyp -> NATS", lambda: publish_logs([few_log], first), "baseline", m)
                timed("add -> NATS", lambda: ingest_messages(second, [few], messages=True), "", m)
                target = open_target(f"sqlite:///{Path(tmp) / 'state.db'}")

                def replay() -> None:
                    with NatsLog(second) as log:
                        fetched = []
                        seq, last = 1, log.head().seq
                        while seq <= last:
                            batch = log.fetch(seq, 1000, timeout=5)
                            fetched += batch
                            seq = batch[-1].seq + 1
                    events = itertools.chain.from_iterable(
                        decode_message(msg, second, adapter=target.adapter) for msg in fetched
                    )
                    apply_events(events, target, source=second)
                    target.close()

                timed("NATS -> SQLite (apply)", replay, "", m)
            finally:
                for url in (first, second):
                    with NatsLog(url) as log:
                        log.delete_stream()
    print(f"messages of 4 quads each; load: {os.getloadavg()[0]:.2f} (1 min)")
    print(f"{'case':28} {'messages':>9} {'seconds':>8} {'messages/s':>11}")
    for name, count, seconds, note in rows:
        print(f"{name:28} {count:>9} {seconds:>8.2f} {count / seconds:>11.0f}  {note}")


if __name__ == "__main__":
    main()
