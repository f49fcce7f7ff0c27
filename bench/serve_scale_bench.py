"""``patchsync serve`` at scale: start-up, memory, fetch by version, the change feed and
catch-up on logs of a million patches (docs/decisions/0023-version-index.md).

    .venv/bin/python -m bench.serve_scale_bench                      # 1M patches, full figures
    .venv/bin/python -m bench.serve_scale_bench --patches 20000 --rotate 5000 --sync 2000

Two logs of ``--patches`` patches written by ``examples/producer.py`` (5 triples a patch,
one stream per segment, so a patch is decoded from a checkpoint): a directory of
``--rotate``-patch segments and one file. They are kept under ``--data`` (default
``bench/out/serve_scale``) and written only when missing. ``patchsync serve`` runs as a real
process serving both, plus the first segment as a topic of its own (the catch-up log).

- **start-up**: spawn to "serving http" with the version indexes present; the baseline is
  the catch-up log served without its index (the server decodes it once to build it, what
  main paid for every log at every start); the indexes of the big logs are built at their
  first start and kept with the logs;
- **RSS** of the server after start-up and its peak after all the requests below;
- **fetch** ``GET /NAME/VERSION`` (RDF Patch text) at ``--fetches`` random versions:
  p50/p99; the baseline is main's way, decoding the segment from its first byte to the
  patch, measured in this process at ``--main-samples`` random places;
- **change feed** ``GET /NAME/changes?after=X&limit=1000``: time to the first byte from
  random ``after``;
- **catch-up** of the first segment by ``patchsync tail http://…``, ``tail grpc://…`` and
  ``tail LOG`` (the local file, the baseline), ``--once`` into fresh SQLite databases;
- **Delta client sync**: the ``rdf-delta`` package's ``DeltaClient.get_log`` fetching
  ``--sync`` patches one by one, against reading the same patches from the JSON change
  feed (both as RDF Patch text); its floor is the same client against a trivial aiohttp
  server answering one constant patch text (what a request costs, whatever serves it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from patchsync.logs.payloads import read_patches
from patchsync.logs.version_index import index_path, remove_index
from patchsync.serve.file_topic import FileLogTopic

from .tail_bench import _timed

ROOT = Path(__file__).resolve().parent.parent
PATCHSYNC = [sys.executable, "-m", "patchsync"]
sys.path.insert(0, str(ROOT / "examples"))


def ensure_logs(data: Path, patches: int, rotate: int, catchup: int) -> tuple[Path, Path, Path]:
    """The segment directory and the single file of ``patches`` patches, and the catch-up
    log (the first segment, or a file of ``catchup`` patches), written if missing."""
    from producer import produce  # examples/producer.py

    data.mkdir(parents=True, exist_ok=True)
    tag = f"{patches}-{rotate}"
    segments, one = data / f"segments-{tag}", data / f"one-{patches}.jellyp"
    logs = [(segments, data / f"segments-{tag}.done"), (one, data / f"one-{patches}.done")]
    short = data / f"catchup-{catchup}.jellyp"
    if catchup != rotate:
        logs.append((short, data / f"catchup-{catchup}.done"))
    for log, done in logs:
        if not done.exists():
            started = time.perf_counter()
            produce(log, count=catchup if log.name.startswith("catchup") else patches, rate=0, rotate=rotate)
            done.write_text(f"{time.perf_counter() - started:.1f} s\n")
    return segments, one, short if catchup != rotate else sorted(segments.glob("*.jellyp"))[0]


def drop_indexes(*logs: Path) -> None:
    """Delete the version index of each log (and its SQLite companions)."""
    for log in logs:
        remove_index(index_path(log))


class Server:
    """``patchsync serve`` with the given topics, over HTTP and gRPC; start-up timed."""

    def __init__(self, topics: dict[str, Path]) -> None:
        args = [*PATCHSYNC, "serve", "--http", "127.0.0.1:0", "--listen", "127.0.0.1:0"]
        for name, path in topics.items():
            args += ["--topic", f"{name}={path}"]
        started = time.perf_counter()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addresses: dict[str, str] = {}
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("serving "):
                _, door, _, address = line.split()
                self.addresses[door] = address
                if len(self.addresses) == 2:
                    break
        if len(self.addresses) != 2:
            raise RuntimeError("serve did not start")
        self.startup = time.perf_counter() - started
        self.http = "http://" + self.addresses["http"]
        self.grpc = "grpc://" + next(a for d, a in self.addresses.items() if d != "http")

    def rss_mb(self, field: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_s(self) -> float:
        """CPU seconds the server has used (user and system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def open_topics(paths: list[Path]) -> float:
    """Seconds to open the log topics of ``paths`` in this process (their indexes checked,
    or built when missing), without the server process's own start."""

    async def go() -> float:
        started = time.perf_counter()
        topics = [FileLogTopic(p.name, str(p), p) for p in paths]
        for topic in topics:
            await topic.open()
        took = time.perf_counter() - started
        for topic in topics:
            await topic.close()
        return took

    return asyncio.run(go())


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def fetches(url: str, name: str, head: int, count: int, rng: random.Random) -> tuple[float, float]:
    """p50/p99 in ms of ``GET /NAME/VERSION`` at random versions."""
    times = []
    with httpx.Client(timeout=120) as client:
        for _ in range(count):
            version = rng.randint(1, head)
            started = time.perf_counter()
            r = client.get(f"{url}/{name}/{version}")
            times.append(time.perf_counter() - started)
            if r.status_code != 200 or f"urn:patch:{version}>" not in r.text:
                raise RuntimeError(f"GET /{name}/{version}: {r.status_code} {r.text[:200]}")
    return percentiles(times)


def feed_first_byte(url: str, name: str, head: int, count: int, rng: random.Random) -> tuple[float, float]:
    """p50/p99 in ms to the first byte of a change-feed answer from a random ``after``."""
    times = []
    with httpx.Client(timeout=120) as client:
        for _ in range(count):
            after = rng.randint(0, head - 1)
            started = time.perf_counter()
            with client.stream("GET", f"{url}/{name}/changes", params={"after": after, "limit": 1000}) as r:
                chunks = r.iter_raw()
                next(chunks)
                times.append(time.perf_counter() - started)
                for _ in chunks:
                    pass
    return percentiles(times)


def main_fetch(segment: Path, rotate: int, samples: int, rng: random.Random) -> tuple[float, float]:
    """Main's fetch: decode the segment from its first byte to the patch (p50/p99 ms)."""
    times = []
    for _ in range(samples):
        place = rng.randint(1, rotate)
        started = time.perf_counter()
        for number, _patch in enumerate(read_patches(segment), 1):
            if number == place:
                break
        times.append(time.perf_counter() - started)
    return percentiles(times)


def _one_by_one(url: str, name: str, count: int) -> float:
    """Seconds for the rdf-delta client to fetch versions 1 to ``count`` of ``name`` one by one."""
    from rdf_delta import DeltaClient

    client = DeltaClient(url)
    started = time.perf_counter()
    for version in range(1, count + 1):
        client.get_log(version, name)
    took = time.perf_counter() - started
    client.close()
    return took


def delta_sync(url: str, name: str, count: int) -> tuple[float, float]:
    """Seconds for the rdf-delta client to fetch ``count`` patches one by one, and for the
    JSON change feed to carry the same patches."""
    one_by_one = _one_by_one(url, name, count)
    started = time.perf_counter()
    after = 0
    with httpx.Client(timeout=120) as http:
        while after < count:
            r = http.get(f"{url}/{name}/changes", params={"after": after, "limit": min(1000, count - after)})
            after = r.json()["last_version"]
    return one_by_one, time.perf_counter() - started


#: A trivial aiohttp server: every GET answers the same RDF Patch text (the floor of a
#: request's cost on loopback, whatever serves it).
_CONSTANT_SERVER = """
import sys
from aiohttp import web
body = sys.stdin.buffer.read()
async def answer(request):
    return web.Response(body=body, content_type="application/rdf-patch")
app = web.Application()
app.router.add_get("/{name}/{version}", answer)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, handle_signals=True)
"""


def delta_floor(url: str, name: str, count: int) -> float:
    """Seconds for the rdf-delta client to fetch ``count`` patches one by one from a trivial
    aiohttp server answering the text of patch 1 to every request: what the client and
    aiohttp cost per request on this machine, the floor of the one-by-one sync."""
    import socket

    body = httpx.get(f"{url}/{name}/1").content
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", _CONSTANT_SERVER, str(port)], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(body)
    proc.stdin.close()
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(f"{base}/{name}/1")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        return _one_by_one(base, name, count)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def catch_up(server: Server, name: str, log: Path, work: Path) -> dict[str, float]:
    """``tail --once`` of the catch-up log through each door and from the local file: wall
    seconds (``KIND``), and CPU seconds of the client (``KIND_cpu``) and of the server
    (``KIND_server_cpu``). On a shared machine the CPU is the steadier figure: the client
    and the server of a remote catch-up take turns on the same cores as everything else."""
    out = {}
    for kind, source in (("file", str(log)), ("http", f"{server.http}/{name}"), ("grpc", f"{server.grpc}/{name}")):
        db = work / f"tail-{kind}.db"
        db.unlink(missing_ok=True)
        before, served = os.times(), server.cpu_s()
        out[kind] = _timed([*PATCHSYNC, "tail", source, "--target", f"sqlite:///{db}", "--once"])
        after = os.times()
        out[f"{kind}_cpu"] = after.children_user + after.children_system - before.children_user - before.children_system
        out[f"{kind}_server_cpu"] = server.cpu_s() - served
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data)
    segments, one, first = ensure_logs(data, args.patches, args.rotate, args.catchup)
    topics = {"seg": segments, "one": one, "first": first}
    result: dict[str, Any] = {}
    # The baseline start-up: the catch-up log without its index, which the server builds
    # by decoding the log once, as main decoded every log at every start.
    drop_indexes(first)
    result["open_cold_s"] = open_topics([first])
    drop_indexes(first)
    cold = Server({"first": first})
    cold.stop()
    result["startup_cold_s"] = cold.startup
    # The big logs' indexes are built once and kept with the logs (bench data cache).
    build = Server(topics)
    build.stop()
    result["first_start_s"] = build.startup
    result["open_s"] = open_topics(list(topics.values()))
    server = Server(topics)
    rng = random.Random(args.seed)
    result.update(startup_s=server.startup, rss_start_mb=server.rss_mb())
    try:
        for name in ("seg", "one"):
            result[f"fetch_{name}"] = fetches(server.http, name, args.patches, args.fetches, rng)
            result[f"feed_{name}"] = feed_first_byte(server.http, name, args.patches, args.feeds, rng)
        result["catch_up"] = catch_up(server, "first", first, data)
        result["sync"] = delta_sync(server.http, "first", args.sync)
        result["sync_floor"] = delta_floor(server.http, "first", args.sync)
        result["rss_peak_mb"] = server.rss_mb("VmHWM")
    finally:
        server.stop()
    result["main_fetch"] = main_fetch(sorted(segments.glob("*.jellyp"))[0], args.rotate, args.main_samples, rng)
    return result


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    print(f"## serve at scale: {args.patches:,} patches ({args.patches // args.rotate} segments, and one file)\n")
    print("| measure | figure | baseline (same run) | target |")
    print("|---|---|---|---|")
    print(
        f"| start-up, indexes present ({2 * args.patches + args.catchup:,} patches): process / opening the "
        f"topics | {r['startup_s']:.2f} s / {r['open_s']:.2f} s | {r['startup_cold_s']:.1f} s / "
        f"{r['open_cold_s']:.1f} s for the {args.catchup:,}-patch catch-up log alone without its index (decoded once, "
        f"as main did at every start) | < 2 s |"
    )
    print(f"| first start of this run (indexes missing are built) | {r['first_start_s']:.1f} s | | info |")
    print(f"| RSS after start-up / peak | {r['rss_start_mb']:.0f} MB / {r['rss_peak_mb']:.0f} MB | | < 200 MB |")
    for name, label in (("seg", "segments"), ("one", "one file")):
        p50, p99 = r[f"fetch_{name}"]
        print(
            f"| fetch by version ({label}) p50 / p99 | {p50:.1f} / {p99:.1f} ms | main decodes from the segment start: {r['main_fetch'][0]:.0f} / {r['main_fetch'][1]:.0f} ms | p99 < 20 ms |"
        )
    for name, label in (("seg", "segments"), ("one", "one file")):
        p50, p99 = r[f"feed_{name}"]
        print(f"| change feed first byte ({label}) p50 / p99 | {p50:.1f} / {p99:.1f} ms | | < 50 ms |")
    cu = r["catch_up"]
    print(
        f"| `tail http://` catch-up ({args.catchup:,} patches) | {cu['http']:.1f} s ({cu['file'] / cu['http']:.2f}x) | `tail LOG` {cu['file']:.1f} s | >= 0.8x |"
    )
    print(
        f"| `tail grpc://` catch-up ({args.catchup:,} patches) | {cu['grpc']:.1f} s ({cu['file'] / cu['grpc']:.2f}x) | `tail LOG` {cu['file']:.1f} s | >= 0.8x |"
    )
    print(
        f"| catch-up CPU, client + server | `tail http://` {cu['http_cpu']:.1f} + {cu['http_server_cpu']:.1f} s, "
        f"`tail grpc://` {cu['grpc_cpu']:.1f} + {cu['grpc_server_cpu']:.1f} s | `tail LOG` {cu['file_cpu']:.1f} s | info |"
    )
    one_by_one, feed = r["sync"]
    floor = r["sync_floor"]
    print(
        f"| rdf-delta client, {args.sync:,} patches one by one | {one_by_one:.1f} s ({one_by_one / feed:.1f}x) | change feed {feed:.1f} s | within 3x |"
    )
    print(
        f"| the same client against a constant answer (aiohttp, loopback) | {floor:.1f} s ({floor / feed:.1f}x the change feed) | | floor |"
    )
    print()
    print(
        f"{verdict(r['startup_s'] < 2)}: start-up {r['startup_s']:.2f} s, of which opening the topics {r['open_s']:.2f} s (target < 2 s)"
    )
    print(f"{verdict(r['rss_peak_mb'] < 200)}: peak RSS {r['rss_peak_mb']:.0f} MB (target < 200 MB)")
    worst = max(r["fetch_seg"][1], r["fetch_one"][1])
    print(f"{verdict(worst < 20)}: fetch p99 {worst:.1f} ms (target < 20 ms)")
    feed_worst = max(r["feed_seg"][1], r["feed_one"][1])
    print(f"{verdict(feed_worst < 50)}: change feed first byte p99 {feed_worst:.1f} ms (target < 50 ms)")
    ratio = min(cu["file"] / cu["http"], cu["file"] / cu["grpc"])
    print(f"{verdict(ratio >= 0.8)}: catch-up {ratio:.2f}x a local tail (target >= 0.8x)")
    print(f"{verdict(one_by_one <= 3 * feed)}: Delta sync {one_by_one / feed:.1f}x the change feed (target within 3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patches", type=int, default=1_000_000)
    parser.add_argument("--rotate", type=int, default=100_000, help="patches per segment (the catch-up log's size)")
    parser.add_argument(
        "--catchup", type=int, default=100_000, help="patches of the catch-up log (the first segment when --rotate)"
    )
    parser.add_argument("--fetches", type=int, default=1000)
    parser.add_argument("--feeds", type=int, default=100)
    parser.add_argument("--sync", type=int, default=100_000, help="patches the Delta client fetches one by one")
    parser.add_argument("--main-samples", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default=str(ROOT / "bench" / "out" / "serve_scale"))
    args = parser.parse_args()
    report(args, run(args))


if __name__ == "__main__":
    main()
