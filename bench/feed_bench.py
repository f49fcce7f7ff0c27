"""The HTTP change feed's JSON answer: its cost, and how long it stalls the event loop.

    .venv/bin/python -m bench.feed_bench                     # 3 rounds of each batch
    .venv/bin/python -m bench.feed_bench --rounds 1 --big-kb 300

A JSON answer carries each patch as RDF Patch text, so the server decodes each patch and
writes its text, then escapes that text into JSON. ``serve_load_bench`` saw that conversion
hold the interpreter lock 15-27 ms a batch of megabyte patches. This bench answers the same
batches both ways, on a real event loop with a 1 ms ticker beside the answer (the door's
other requests), and reports the time per answer and the ticker's longest wait (the loop's
stall):

- baseline: the way before (each patch's text made in a reader thread by parsing every
  decoded term again to format it, then the whole change escaped on the event loop);
- core: ``patchsync.serve.feed.json_chunks`` as the door runs it now (the text written from
  the decoded terms as they are, escaped 64 Ki characters a step, all in a reader thread).

Both answers are checked to be the same JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

from patchsync.codec.rdfp import write_rdfp
from patchsync.events import Add, Header, Options, PatchEnd, TxCommit, TxStart
from patchsync.logs.payloads import NT_TERMS, encode_patch, read_payload
from patchsync.options import PatchOptions
from patchsync.serve import feed
from patchsync.serve.topics import Entry, flatten, in_reader, thread_batches


def _patch(n: int, size: int) -> bytes:
    events: list[Any] = [Header("id", f"<urn:feed:{n}>")]
    if n > 1:
        events.append(Header("prev", f"<urn:feed:{n - 1}>"))
    value = NT_TERMS.literal("x" * size if size else f"value {n} é")
    events += [TxStart(), Add(f"<http://ex.org/s/{n}>", "<http://ex.org/p>", value, None), TxCommit(), PatchEnd()]
    return encode_patch(events, PatchOptions())


def _text_before(payload: bytes) -> str:
    # The text as the door made it before: every decoded term parsed again and formatted.
    events = [e for e in read_payload(payload) if type(e) is not Options]
    return write_rdfp(events, NT_TERMS, segments=False)


async def _baseline(entries: list[Entry]) -> bytes:
    out = [feed.json_start()]
    written, last = 0, 0
    for entry in entries:
        change = feed.json_change(
            entry.version, entry.patch_id, await in_reader(_text_before, entry.payload), first=not written
        )
        if not feed.fits(written, len(change), first=not written):
            break
        out.append(change)
        written += len(change)
        last = entry.version
    out.append(feed.json_end(last, len(entries), entries[-1].patch_id))
    return b"".join(out)


async def _core(entries: list[Entry]) -> bytes:
    chunks = feed.json_chunks(entries, 0, (len(entries), entries[-1].patch_id))
    return b"".join([c async for c in flatten(thread_batches(lambda: iter(chunks), batch=16))])


async def _measure(
    answer: Callable[[list[Entry]], Coroutine[Any, Any, bytes]], entries: list[Entry]
) -> tuple[float, float, bytes]:
    """Wall time of one answer and the longest wait of a 1 ms ticker meanwhile (ms)."""
    stalls: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            stalls.append(time.perf_counter() - before - 0.001)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    body = await answer(entries)
    took = time.perf_counter() - start
    done.set()
    await tick
    return took * 1000, max(stalls, default=0.0) * 1000, body


async def _run(args: argparse.Namespace) -> None:
    batches = {
        f"{args.big} patches of {args.big_kb} KiB": [
            Entry(n, f"<urn:feed:{n}>", _patch(n, args.big_kb << 10)) for n in range(1, args.big + 1)
        ],
        f"{args.small} small patches": [Entry(n, f"<urn:feed:{n}>", _patch(n, 0)) for n in range(1, args.small + 1)],
    }
    print("| batch | way | answer ms (median) | longest loop stall ms (median) | answer MiB |")
    print("|---|---|---:|---:|---:|")
    for label, entries in batches.items():
        bodies = {}
        for way, answer in (("baseline (before)", _baseline), ("core (now)", _core)):
            took, stall = [], []
            for _ in range(args.rounds):
                t, s, body = await _measure(answer, entries)
                took.append(t)
                stall.append(s)
            bodies[way] = body
            print(
                f"| {label} | {way} | {statistics.median(took):.1f} | {statistics.median(stall):.1f} | "
                f"{len(body) / (1 << 20):.2f} |"
            )
        first, second = bodies.values()
        assert json.loads(first) == json.loads(second), "the two answers differ"
    print("info: both ways give the same JSON answer; the stall is the longest a 1 ms timer on the loop waited")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big", type=int, default=3, help="large patches in one answer (4 MiB holds 3 of 1300 KiB)")
    parser.add_argument("--big-kb", type=int, default=1300, help="KiB of each large patch's literal")
    parser.add_argument("--small", type=int, default=100, help="small patches in one answer")
    asyncio.run(_run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
