"""A NATS stream topic's start-up and memory with its id index on disk, against without
(docs/decisions/0029-nats-topic-index.md).

    .venv/bin/python -m bench.nats_index_bench                       # 100,000 messages
    .venv/bin/python -m bench.nats_index_bench --messages 10000
    .venv/bin/python -m bench.nats_index_bench --main ../main-old    # + an older checkout

Needs NATS JetStream (``--nats``, default ``$PATCHSYNC_NATS_URL`` or
``nats://127.0.0.1:4222``). A stream of ``--messages`` patches (one patch a message, 5
triples, each with its id header, as ``serve`` publishes them) is made for the run and
deleted after it. Each start is a fresh process that opens the topic (``NatsTopic.open``:
the follower's first reads, the index checked or built) and reports the time, the
messages it read, and its RSS before and after:

- **index present**: the index was built by an earlier start and 10 patches were
  published since (a restart after some traffic); the figure;
- **index absent** (baseline): the first start with ``--index-dir``, building the index;
- **in memory** (baseline): no index directory, the stream read whole into an index in
  memory at every start;
- **older checkout** (with ``--main DIR``): that checkout's ``NatsTopic`` (main before
  this change kept a dict of every patch id, built by reading the stream whole).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from patchsync.events import Add, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.payloads import MSG_ID, encode_patch, text_options
from patchsync.nats.nats_log import NatsLog

EX = "http://example.org/"
#: Patches published at a time (awaited together: the stream's order is theirs).
IN_FLIGHT = 1000

#: The start measured in a fresh process: argv = stream URL, index dir ("" = none).
_START = """
import asyncio, json, sys, time
from pathlib import Path
from patchsync.nats.nats_log import NatsLog
from patchsync.nats.url import parse_stream_url
from patchsync.serve.nats_topic import NatsTopic

def rss(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024

read = []
real = NatsLog.fetch
def fetch(self, *args, **kwargs):
    messages = real(self, *args, **kwargs)
    read.extend(m.seq for m in messages)
    return messages
NatsLog.fetch = fetch

async def main():
    url = parse_stream_url(sys.argv[1])
    kwargs = {"index_dir": Path(sys.argv[2])} if sys.argv[2] else {}
    topic = NatsTopic("bench", sys.argv[1], url, **kwargs)
    before = rss("VmRSS")
    started = time.perf_counter()
    await topic.open()
    took = time.perf_counter() - started
    opened = len(read)
    probe = topic.version_of(topic.head) if topic.head else None
    after = rss("VmRSS")
    await topic.close()
    import patchsync
    print(json.dumps({"code": patchsync.__file__, "open_s": took, "read": opened, "version": topic.version, "probe": probe,
                      "rss_before_mb": before, "rss_after_mb": after, "rss_peak_mb": rss("VmHWM")}))

asyncio.run(main())
"""


def patch_payload(n: int) -> bytes:
    events = [Header("id", f"<urn:bench:{n}>")]
    if n > 1:
        events.append(Header("prev", f"<urn:bench:{n - 1}>"))
    events.append(TxStart())
    events += [Add(f"<{EX}s{n}>", f"<{EX}p{i}>", f'"value {n}.{i}"', f"<{EX}g>") for i in range(5)]
    events += [TxCommit(), PatchEnd()]
    return encode_patch(events, text_options(events))


def publish(url: str, first: int, count: int) -> float:
    """Publish patches ``first`` .. ``first + count - 1``; seconds taken."""
    started = time.perf_counter()
    with NatsLog(url) as log:
        log.ensure_stream()
        for chunk in range(first, first + count, IN_FLIGHT):
            numbers = range(chunk, min(first + count, chunk + IN_FLIGHT))

            async def send(numbers: range = numbers) -> None:
                # Sent in order on one connection, acknowledged together.
                await asyncio.gather(
                    *(
                        log.js.publish(
                            log.subject, patch_payload(n), stream=log.name, headers={MSG_ID: f"urn:bench:{n}"}
                        )
                        for n in numbers
                    )
                )

            log.run(send)
    return time.perf_counter() - started


def start(url: str, index_dir: Path | None, python: str = sys.executable, path: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = path
    args = [python, "-c", _START, url, str(index_dir) if index_dir is not None else ""]
    # Run from the root directory: ``python -c`` imports from its working directory first.
    result = subprocess.run(args, capture_output=True, text=True, env=env, check=False, cwd="/")
    if result.returncode != 0:
        raise RuntimeError(f"the start failed: {result.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    if path is not None and not answer["code"].startswith(path):
        raise RuntimeError(f"the older checkout's start imported {answer['code']}")
    return answer


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nats", default=os.environ.get("PATCHSYNC_NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--main", metavar="DIR", help="an older checkout to start as a baseline too")
    args = parser.parse_args()
    url = f"{args.nats}/bench_natsidx_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="nats-index-bench-"))
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        print(f"info: load average before: {load()}")
        took = publish(url, 1, args.messages)
        print(f"info: published {args.messages:,} patches in {took:.1f} s")
        rows.append(("in memory (stream read whole), baseline", start(url, None)))
        if args.main:
            rows.append((f"older checkout ({Path(args.main).name}), baseline", start(url, None, path=args.main)))
        rows.append(("index absent (first start builds it), baseline", start(url, work / "idx")))
        publish(url, args.messages + 1, 10)
        present = start(url, work / "idx")
        rows.append(("index present (10 patches since the last start)", present))
        index_bytes = sum(f.stat().st_size for f in (work / "idx").iterdir())
    finally:
        with NatsLog(url) as log:
            log.delete_stream()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n## NATS topic start-up, a stream of {args.messages:,} patches\n")
    print("| start | messages read | opening | RSS growth while opening | RSS after |")
    print("|---|---|---|---|---|")
    for label, r in rows:
        growth = r["rss_after_mb"] - r["rss_before_mb"]
        print(f"| {label} | {r['read']:,} | {r['open_s']:.2f} s | {growth:.1f} MB | {r['rss_after_mb']:.0f} MB |")
    print(f"\ninfo: index file {index_bytes / 1e6:.1f} MB; load average after: {load()}")
    baseline = rows[0][1]
    ok = present["read"] == 10 and present["open_s"] < baseline["open_s"]
    verdict = "PASS" if ok else "FAIL"
    print(
        f"{verdict}: with its index a start read {present['read']} messages in {present['open_s']:.2f} s "
        f"(the stream read whole: {baseline['read']:,} in {baseline['open_s']:.2f} s)"
    )


if __name__ == "__main__":
    main()
