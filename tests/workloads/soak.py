"""The soak harness: a steady producer, ``patchsync tail`` into PostgreSQL, ``kill -9`` again and again.

``bench/soak_bench.py`` runs it for 10 minutes at 1,000 patches/s and writes a report;
``tests/test_soak.py`` runs it CI-sized; ``race`` adds a second daemon on hard links of the
same segments, whose patches must still each be applied once. Run from the repository root. What happens:

* **Producer** (a subprocess: this module run as ``python -m tests.workloads.soak``):
  writes ``rate`` patches per second for ``seconds`` into a directory of rotated segments (a new ``.jellyp`` file
  every ``rotate`` patches) with :class:`patchsync.logs.patch_logs.LogAppender`. Patches are small
  and chained (``H id``, ``H prev``): each updates a few properties of one of
  ``entities`` resources (delete the old value, add the new one), so the target's size
  stays bounded and deletes are as frequent as adds; a quarter of the resources live in
  each of three named graphs and the rest in the default graph; objects are IRIs, plain,
  language-tagged and typed literals, some non-ASCII. About 5% of patches first run a
  transaction that is aborted (``TX … TA``), 5% carry their rows outside any transaction
  (an implicit unit), some re-add a present quad or delete an absent one (no-ops). The
  producer keeps its own model of the resulting state (set semantics, aborted units
  dropped), written as sorted N-Quads at the end: a reference that does not come from
  patchsync's applier. It reports its count and clock on stdout every 50 ms.
* **Daemon**: ``patchsync tail DIR --target PG --state-dir DIR`` as a real subprocess.
  Every ``kill_every`` seconds (jittered ±30%, and only once the incarnation has
  applied something) it gets ``SIGKILL`` and is restarted at once. Its stderr goes to
  ``daemon.log`` in the work directory.
* **Sampler** (this process), once per second: patches produced, patches applied (the sum
  of ``ps_sources.patches``, i.e. the checkpoints in the target), lag in patches, in
  seconds (now minus the time the producer wrote the oldest patch not yet applied) and
  in bytes (log bytes after the frame of each checkpoint), daemon RSS
  (``VmRSS`` of ``/proc/PID/status``) and restarts.
* **End**: the producer stops, kills stop, the daemon catches up and gets ``SIGTERM``
  (it must exit 0). ``patchsync dump`` of PostgreSQL must equal the producer's reference
  and the same logs applied by patchsync's applier (``apply_check``: into the in-memory
  reference target by default, or by ``patchsync apply`` into a fresh SQLite file);
  ``ps_patches`` must hold every patch id exactly once.

The target is an empty database or schema given by URL; :func:`fresh_schema` makes one.
"""

from __future__ import annotations

import bisect
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PATCHSYNC = [sys.executable, "-m", "patchsync"]

EX = "http://example.org/"
GRAPHS = (None, None, None, None, "http://example.org/g/a", "http://example.org/g/b", "http://example.org/g/c")
PROPS = ("name", "label", "count", "link", "note")
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"
#: Seconds between the producer's progress lines (count and clock).
REPORT_SECONDS = 0.05


# -- the workload ----------------------------------------------------------------------------


class Workload:
    """Deterministic chained patches and the state they lead to, kept without patchsync's applier.

    ``patch(n)`` returns the events of patch ``n`` (1-based, called in order) and updates
    the model: ``values[entity][prop]`` is the object of the one quad the resource has for
    that property, if any.
    """

    def __init__(self, seed: int = 1, entities: int = 20_000) -> None:
        self.seed = seed
        self.entities = entities
        self.values: dict[int, dict[str, str]] = {}

    @staticmethod
    def subject(e: int) -> str:
        return f"<{EX}item/{e}>"

    @staticmethod
    def graph(e: int) -> str | None:
        g = GRAPHS[e % len(GRAPHS)]
        return f"<{g}>" if g else None

    @staticmethod
    def predicate(prop: str) -> str:
        return f"<{EX}{prop}>"

    def _object(self, rng: random.Random, n: int, prop: str) -> str:
        from patchsync.terms.ntriples import format_iri, format_literal

        if prop == "count":
            return format_literal(str(rng.randrange(10**6)), None, XSD_INT)
        if prop == "link":
            return format_iri(f"{EX}item/{rng.randrange(self.entities)}")
        if prop == "label":
            return format_literal(rng.choice(("café", "label", "日本語", "Ωmega")) + f" {n}", rng.choice(("en", "fr")))
        return format_literal(f"value {n}.{rng.randrange(100)}")

    def patch(self, n: int) -> list[Any]:
        from patchsync.events import Add, Delete, Header, PatchEnd, TxAbort, TxCommit, TxStart

        rng = random.Random(self.seed * 1_000_003 + n)
        events: list[Any] = [Header("id", f"<urn:soak:{n}>")]
        if n > 1:
            events.append(Header("prev", f"<urn:soak:{n - 1}>"))
        kind = rng.random()
        if kind < 0.05:
            # An aborted transaction first: none of it may reach the target.
            e = rng.randrange(self.entities)
            events.append(TxStart())
            events.append(Add(self.subject(e), self.predicate("name"), '"aborted"', self.graph(e)))
            for prop, o in self.values.get(e, {}).items():
                events.append(Delete(self.subject(e), self.predicate(prop), o, self.graph(e)))
            events.append(TxAbort())
        implicit = 0.05 <= kind < 0.10
        if not implicit:
            events.append(TxStart())
        e = rng.randrange(self.entities)
        s, g = self.subject(e), self.graph(e)
        current = self.values.setdefault(e, {})
        if current and rng.random() < 0.08:
            # The resource is removed: every quad it has is deleted.
            for prop, o in sorted(current.items()):
                events.append(Delete(s, self.predicate(prop), o, g))
            current.clear()
        else:
            for prop in rng.sample(PROPS, rng.randint(1, 3)):
                old = current.get(prop)
                new = self._object(rng, n, prop)
                if old is not None and old != new:
                    events.append(Delete(s, self.predicate(prop), old, g))
                events.append(Add(s, self.predicate(prop), new, g))
                current[prop] = new
            if rng.random() < 0.1:
                # Set semantics: re-adding a present quad and deleting an absent one are no-ops.
                prop, o = next(iter(current.items()))
                events.append(Add(s, self.predicate(prop), o, g))
                events.append(Delete(s, self.predicate("name"), '"never there"', g))
        if not implicit:
            events.append(TxCommit())
        events.append(PatchEnd())
        return events

    def nquads(self) -> list[str]:
        """The model's state as sorted N-Quads lines (what ``patchsync dump`` writes)."""
        lines = []
        for e, props in self.values.items():
            s, g = self.subject(e), self.graph(e)
            for prop, o in props.items():
                p = self.predicate(prop)
                lines.append(f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n")
        lines.sort()
        return lines


def produce(
    logs: Path,
    *,
    rate: float,
    seconds: float,
    rotate: int,
    seed: int = 1,
    entities: int = 20_000,
    report: Any = None,
) -> tuple[int, Workload, float]:
    """Write ``rate`` patches/s for ``seconds`` into rotated segments of ``logs``.

    Returns (patches written, the model, the longest the producer fell behind its
    schedule in seconds). ``report(count, monotonic_time)`` is called every
    ``REPORT_SECONDS`` and at the end. The schedule is absolute (patch ``n`` is due at
    ``start + n / rate``): a producer that fell behind catches up at full speed, so the
    rate over the run stays the one asked for.
    """
    from patchsync.logs.patch_logs import LogAppender
    from patchsync.options import PatchOptions, StatementType, StreamType
    from patchsync.terms.ntriples import NTriplesTerms

    options = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.QUADS)
    adapter = NTriplesTerms()
    logs.mkdir(parents=True, exist_ok=True)
    work = Workload(seed, entities)
    total = int(rate * seconds)
    start = time.monotonic()
    next_report = start
    behind = 0.0
    n = 0
    while n < total:
        segment = logs / f"{n // rotate + 1:08d}.jellyp"
        with LogAppender(segment, options, adapter) as out:
            for _ in range(min(rotate, total - n)):
                due = start + n / rate
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                else:
                    behind = max(behind, now - due)
                n += 1
                out.write(work.patch(n))
                if report is not None and time.monotonic() >= next_report:
                    report(n, time.monotonic())
                    next_report += REPORT_SECONDS
    if report is not None:
        report(n, time.monotonic())
    return n, work, behind


# -- observing the producer and the target ---------------------------------------------------


class ProducerWatch:
    """Reads the producer's progress lines in a thread; answers when patch ``n`` was written."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.counts: list[int] = [0]
        self.clocks: list[float] = [time.monotonic()]
        self.done: int | None = None
        self.behind = 0.0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if parts and parts[0] == "done":
                self.done, self.behind = int(parts[1]), float(parts[2])
            elif len(parts) == 2:
                self.counts.append(int(parts[0]))
                self.clocks.append(float(parts[1]))

    @property
    def produced(self) -> int:
        return self.counts[-1]

    def written_at(self, n: int) -> float:
        """The clock of the first progress line at which patch ``n`` was written (an upper bound)."""
        i = bisect.bisect_left(self.counts, n)
        return self.clocks[min(i, len(self.clocks) - 1)]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


class TargetProbe:
    """Reads the checkpoints of the target directly: patches applied and bytes not yet applied."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine

        self.engine = create_engine(url, isolation_level="AUTOCOMMIT")
        self.conn: Any = None

    def checkpoints(self) -> dict[str, tuple[int, int]] | None:
        """source -> (checkpoint byte offset, patches); ``None`` if the database cannot be read.

        ``None`` also before the daemon made its tables; while the server restarts, say.
        """
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            if self.conn is None:
                self.conn = self.engine.connect()
            rows = self.conn.execute(text("SELECT source, pos_offset, patches FROM ps_sources")).all()
        except SQLAlchemyError:
            if self.conn is not None:
                self.conn.invalidate()
                self.conn = None
            return None
        return {str(src): (int(off), int(n)) for src, off, n in rows}

    def patch_ids(self) -> tuple[int, int]:
        """(rows in ps_patches, distinct patch ids among them)."""
        from sqlalchemy import text

        with self.engine.connect() as c:
            total, distinct = c.execute(text("SELECT count(*), count(DISTINCT patch_id) FROM ps_patches")).one()
        return int(total), int(distinct)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.engine.dispose()


def lag_bytes(logs: Path, cps: dict[str, tuple[int, int]]) -> int:
    """Log bytes not yet applied: after the frame of each file's checkpoint, whole files without one."""
    from patchsync.codec.framing import read_varint

    lag = 0
    for f in sorted(logs.glob("*.jellyp")):
        try:
            size = f.stat().st_size
        except FileNotFoundError:
            continue
        cp = cps.get(str(f.resolve()))
        if cp is None:
            lag += size
            continue
        with open(f, "rb") as fh:
            head = os.pread(fh.fileno(), 10, cp[0])
        parsed = read_varint(head, 0, len(head)) if head else None
        end = cp[0] + (parsed[1] + parsed[0] if parsed else 0)
        lag += max(0, size - end)
    return lag


def rss_kib(pid: int) -> int | None:
    """Resident set size of a live process in KiB (``VmRSS``), ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


# -- the harness -----------------------------------------------------------------------------


@dataclass
class Sample:
    """One observation, once per second."""

    t: float  # seconds since the producer started
    produced: int
    applied: int
    lag_patches: int
    lag_seconds: float
    lag_bytes: int
    rss_kib: int | None
    pid: int
    restarts: int
    since_start: float  # seconds since this daemon incarnation started
    load1: float  # the machine's 1-minute load average (other work shares its cores)
    producer_rss_kib: int | None = None
    probe_ok: bool = True  # False: the target could not be read; applied and lag repeat the last sample


@dataclass
class Kill:
    """One ``kill -9`` and what followed it."""

    t: float
    pid: int
    applied_at_kill: int
    applied_before_next_kill: int = -1
    first_progress_s: float | None = None  # seconds from the restart to the next checkpoint advance


@dataclass
class SoakResult:
    """Everything one soak run measured."""

    config: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    produced: int = 0
    producer_behind_s: float = 0.0
    applied: int = 0
    catch_up_s: float = 0.0
    daemon_exits: list[tuple[float, int]] = field(default_factory=list)  # (t, code): exits not caused by kill -9
    final_exit: int | None = None
    racer_exits: list[tuple[float, int]] = field(default_factory=list)  # --race: the twin daemon's exits
    racer_final_exit: int | None = None
    reference_quads: int = 0
    dump_quads: int = 0
    equal_reference: bool = False
    equal_apply: bool | None = None
    ps_patches: tuple[int, int] = (0, 0)
    tracebacks: int = 0
    checks_s: float = 0.0  # the final dump and comparisons
    wall_s: float = 0.0

    def minutes(self) -> list[dict[str, Any]]:
        """The per-minute table (a last partial minute included)."""
        rows = []
        by_minute: dict[int, list[Sample]] = {}
        for s in self.samples:
            by_minute.setdefault(int(s.t // 60), []).append(s)
        prev_produced = prev_applied = 0
        for m in sorted(by_minute):
            ss = by_minute[m]
            lags = sorted(s.lag_patches for s in ss)
            rss = [s.rss_kib for s in ss if s.rss_kib is not None]
            warm = [s.rss_kib for s in ss if s.rss_kib is not None and s.since_start >= self.config["warmup"]]
            rows.append(
                {
                    "minute": m + 1,
                    "samples": len(ss),
                    "produced": ss[-1].produced - prev_produced,
                    "applied": ss[-1].applied - prev_applied,
                    "lag_p50": _pct(lags, 0.5),
                    "lag_p99": _pct(lags, 0.99),
                    "lag_max": lags[-1],
                    "lag_s_max": round(max(s.lag_seconds for s in ss), 2),
                    "lag_mb_max": round(max(s.lag_bytes for s in ss) / 1e6, 2),
                    "rss_min_mb": round(min(rss) / 1024, 1) if rss else None,
                    "rss_max_mb": round(max(rss) / 1024, 1) if rss else None,
                    "rss_warm_median_mb": round(statistics.median(warm) / 1024, 1) if warm else None,
                    "load1_avg": round(statistics.mean(s.load1 for s in ss), 2),
                    "restarts": ss[-1].restarts - (by_minute[m - 1][-1].restarts if m - 1 in by_minute else 0),
                }
            )
            prev_produced, prev_applied = ss[-1].produced, ss[-1].applied
        return rows

    def memory_verdict(self) -> dict[str, Any]:
        """Daemon RSS once warmed up, first against last minute of the kill -9 period.

        Only the producer's run counts (the daemon is restarted every ``kill_every``
        seconds then, so a leak shows as a rising floor); the catch-up afterwards is one
        long incarnation, reported as ``longest`` (its first and last warmed-up RSS).
        """
        warmup, end = self.config["warmup"], self.config["seconds"]
        warm = [s for s in self.samples if s.rss_kib and s.since_start >= warmup and s.t <= end]
        if len(warm) < 4:
            return {"flat": None, "reason": "too few warmed-up samples"}
        span = min(60.0, max(1.0, (warm[-1].t - warm[0].t) / 3))
        first = [s.rss_kib or 0 for s in warm if s.t <= warm[0].t + span]
        last = [s.rss_kib or 0 for s in warm if s.t >= warm[-1].t - span]
        first_mb, last_mb = statistics.median(first) / 1024, statistics.median(last) / 1024
        first_max, last_max = max(first) / 1024, max(last) / 1024
        # Flat: the last period's typical and peak RSS are within 15% (or 10 MiB) of the first's.
        flat = last_mb <= max(first_mb * 1.15, first_mb + 10) and last_max <= max(first_max * 1.15, first_max + 10)
        by_pid: dict[int, list[Sample]] = {}
        for s in self.samples:
            if s.rss_kib and s.since_start >= warmup:
                by_pid.setdefault(s.pid, []).append(s)
        longest = max(by_pid.values(), key=len)
        return {
            "flat": flat,
            "first_median_mb": round(first_mb, 1),
            "last_median_mb": round(last_mb, 1),
            "first_max_mb": round(first_max, 1),
            "last_max_mb": round(last_max, 1),
            "window_s": round(span),
            "longest": {
                "seconds": round(longest[-1].t - longest[0].t),
                "patches": longest[-1].applied - longest[0].applied,
                "first_mb": round((longest[0].rss_kib or 0) / 1024, 1),
                "last_mb": round((longest[-1].rss_kib or 0) / 1024, 1),
                "max_mb": round(max(s.rss_kib or 0 for s in longest) / 1024, 1),
            },
        }

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["minutes"] = self.minutes()
        data["memory"] = self.memory_verdict()
        return data


def _pct(sorted_values: list[int], q: float) -> int:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def _start_daemon(logs: Path, url: str, state_dir: Path | None, log_file: Any) -> subprocess.Popen[bytes]:
    cmd = [*PATCHSYNC, "tail", str(logs), "--target", url, "--log-interval", "5"]
    if state_dir is not None:
        cmd += ["--state-dir", str(state_dir)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file, cwd=ROOT)


def _mirror(logs: Path, twin: Path) -> None:
    """Hard-link every segment of ``logs`` not linked yet into ``twin``: one file, two names."""
    for f in sorted(logs.glob("*.jellyp")):
        link = twin / f.name
        if not link.exists():
            os.link(f, link)


def _applied_in_memory(logs: Path) -> list[str]:
    """The logs applied in order into the reference target, dumped as sorted N-Quads lines."""
    import io

    from patchsync.apply import MemoryTarget, apply_file
    from patchsync.apply.dump import write_dump

    target = MemoryTarget()
    for f in sorted(logs.glob("*.jellyp")):
        apply_file(f, target, source=str(f.resolve()))
    out = io.BytesIO()
    write_dump(target, "nq", out)
    return sorted(out.getvalue().decode().splitlines(keepends=True))


def _dump_sorted(url: str) -> list[str]:
    r = subprocess.run([*PATCHSYNC, "dump", "--target", url], capture_output=True, timeout=1800, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"patchsync dump --target {url} failed: {r.stderr.decode()[-2000:]}")
    return sorted(r.stdout.decode().splitlines(keepends=True))


def run_soak(
    url: str,
    work: Path,
    *,
    rate: float,
    seconds: float,
    kill_every: float,
    rotate: int,
    entities: int = 20_000,
    seed: int = 1,
    warmup: float = 10.0,
    state_dir: bool = True,
    apply_check: str | None = "memory",
    catch_up_timeout: float = 600.0,
    echo: Any = None,
    race: bool = False,
) -> SoakResult:
    """One soak run into the SQL target at ``url`` (an empty database or schema), files under ``work``.

    ``apply_check`` also compares the dump with the same logs applied by patchsync's
    applier: ``"memory"`` in this process into the reference :class:`MemoryTarget`,
    ``"sqlite"`` by ``patchsync apply`` into a fresh SQLite file (about 500 patches/s
    of this workload on the 2-core development machine), ``None`` not at all.
    ``echo(line)`` receives a progress line every 10 seconds. ``race`` runs the twin daemon
    (see the module docstring); applied counts and lag are the first daemon's. Raises ``RuntimeError`` if
    the daemon, catching up after the producer ended, applies nothing for ``catch_up_timeout`` seconds.
    """
    logs = work / "logs"
    reference = work / "reference.nq"
    daemon_log = work / "daemon.log"
    state = work / "state" if state_dir else None
    config = {
        "rate": rate,
        "seconds": seconds,
        "kill_every": kill_every,
        "rotate": rotate,
        "entities": entities,
        "seed": seed,
        "warmup": warmup,
        "state_dir": state_dir,
        "apply_check": apply_check,
        "target": url.split("@")[-1],
        "race": race,
    }
    twin = work / "twin"
    twin_prefix = str(twin.resolve())
    racer: subprocess.Popen[bytes] | None = None
    result = SoakResult(config=config)
    rng = random.Random(seed)
    wall0 = time.monotonic()
    # The daemon starts before the producer has written anything: the directory it tails must
    # exist by then (tail refuses a directory that does not).
    logs.mkdir(parents=True, exist_ok=True)
    producer = subprocess.Popen(
        [
            *[sys.executable, "-m", "tests.workloads.soak"],
            "--produce",
            str(logs),
            "--reference",
            str(reference),
            "--rate",
            str(rate),
            "--minutes",
            str(seconds / 60),
            "--rotate",
            str(rotate),
            "--seed",
            str(seed),
            "--entities",
            str(entities),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    watch = ProducerWatch(producer)
    probe = TargetProbe(url)
    t0 = time.monotonic()
    with open(daemon_log, "ab") as log_file:
        daemon = _start_daemon(logs, url, state, log_file)
        started = time.monotonic()
        restarts = 0
        applied_at_start = 0
        next_kill = t0 + kill_every * rng.uniform(0.7, 1.3)
        last_echo = t0
        cps: dict[str, tuple[int, int]] = {}
        catching_up_since: float | None = None
        # During the catch-up: when the daemon last applied more, and how far it had got.
        progress_at, caught_up_to = 0.0, -1
        try:
            while True:
                now = time.monotonic()
                read = probe.checkpoints()
                probe_ok = read is not None
                if read is not None:
                    cps = {src: cp for src, cp in read.items() if not src.startswith(twin_prefix)}
                if race and logs.is_dir():
                    twin.mkdir(exist_ok=True)
                    _mirror(logs, twin)
                    if racer is None or racer.poll() is not None:
                        if racer is not None:
                            result.racer_exits.append((round(now - t0, 2), racer.returncode))
                        racer = _start_daemon(twin, url, None, log_file)
                applied = sum(n for _, n in cps.values())
                produced = watch.produced
                if result.kills and result.kills[-1].first_progress_s is None and applied > applied_at_start:
                    result.kills[-1].first_progress_s = round(now - started, 2)
                lag_s = 0.0
                if applied < produced:
                    lag_s = max(0.0, now - watch.written_at(applied + 1))
                sample = Sample(
                    t=round(now - t0, 2),
                    produced=produced,
                    applied=applied,
                    lag_patches=max(0, produced - applied),
                    lag_seconds=round(lag_s, 3),
                    lag_bytes=lag_bytes(logs, cps),
                    rss_kib=rss_kib(daemon.pid),
                    pid=daemon.pid,
                    restarts=restarts,
                    since_start=round(now - started, 2),
                    load1=os.getloadavg()[0],
                    producer_rss_kib=rss_kib(producer.pid),
                    probe_ok=probe_ok,
                )
                result.samples.append(sample)
                if echo is not None and now - last_echo >= 10:
                    last_echo = now
                    echo(
                        f"t={sample.t:6.0f}s produced={produced} applied={applied} lag={sample.lag_patches} "
                        f"({lag_s:.1f}s) rss={(sample.rss_kib or 0) / 1024:.0f}MB restarts={restarts}"
                    )
                code = daemon.poll()
                if code is not None:
                    # The daemon ended on its own: a failure to report; restart it to go on.
                    result.daemon_exits.append((sample.t, code))
                    daemon = _start_daemon(logs, url, state, log_file)
                    started, applied_at_start = time.monotonic(), applied
                producer_done = producer.poll() is not None
                if producer_done and catching_up_since is None:
                    catching_up_since = now
                if producer_done and applied > caught_up_to:
                    # The catch-up's bound runs from its last progress: a slow machine that
                    # still applies is waited for.
                    progress_at, caught_up_to = now, applied
                if producer_done and watch.done is not None and applied >= watch.done:
                    break
                if catching_up_since is not None and now - progress_at > catch_up_timeout:
                    raise RuntimeError(
                        f"the daemon applied nothing for {catch_up_timeout:.0f}s while catching up: "
                        f"{applied} of {watch.done} patches applied (see {daemon_log})"
                    )
                # Kill only while the producer runs, and only an incarnation that applied
                # something: a kill before any progress would prove nothing.
                if not producer_done and now >= next_kill and applied > applied_at_start:
                    if result.kills:
                        result.kills[-1].applied_before_next_kill = applied
                    daemon.send_signal(signal.SIGKILL)
                    daemon.wait()
                    result.kills.append(Kill(t=round(now - t0, 2), pid=daemon.pid, applied_at_kill=applied))
                    # The kill may have landed after the checkpoint query: read it again.
                    cps = probe.checkpoints() or cps
                    applied = sum(n for _, n in cps.values())
                    result.kills[-1].applied_at_kill = applied
                    restarts += 1
                    daemon = _start_daemon(logs, url, state, log_file)
                    started, applied_at_start = time.monotonic(), applied
                    next_kill = started + kill_every * rng.uniform(0.7, 1.3)
                time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
            result.catch_up_s = round(time.monotonic() - (catching_up_since or time.monotonic()), 2)
            if result.kills:
                result.kills[-1].applied_before_next_kill = applied
                if result.kills[-1].first_progress_s is None and applied > applied_at_start:
                    result.kills[-1].first_progress_s = round(time.monotonic() - started, 2)
            daemon.send_signal(signal.SIGTERM)
            result.final_exit = daemon.wait(timeout=120)
            if racer is not None:
                racer.send_signal(signal.SIGTERM)
                result.racer_final_exit = racer.wait(timeout=120)
        finally:
            for proc in (daemon, racer):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if producer.poll() is None:
                producer.kill()
                producer.wait()
            watch.join(10)
    checks0 = time.monotonic()
    result.produced = watch.done or watch.produced
    result.producer_behind_s = round(watch.behind, 3)
    final = probe.checkpoints()
    if final is not None:
        cps = {src: cp for src, cp in final.items() if not src.startswith(twin_prefix)}
    result.applied = sum(n for _, n in cps.values())
    result.ps_patches = probe.patch_ids()
    probe.close()
    result.tracebacks = daemon_log.read_text(errors="replace").count("Traceback")
    dump = _dump_sorted(url)
    expected = reference.read_text().splitlines(keepends=True)
    result.dump_quads, result.reference_quads = len(dump), len(expected)
    result.equal_reference = dump == expected
    if apply_check == "sqlite":
        check = work / "check.db"
        files = [str(f) for f in sorted(logs.glob("*.jellyp"))]
        r = subprocess.run(
            [*PATCHSYNC, "apply", "--no-progress", *files, "--target", f"sqlite:///{check}"],
            capture_output=True,
            timeout=3600,
            cwd=ROOT,
        )
        if r.returncode != 0:
            raise RuntimeError(f"patchsync apply of the logs failed: {r.stderr.decode()[-2000:]}")
        result.equal_apply = _dump_sorted(f"sqlite:///{check}") == dump
    elif apply_check == "memory":
        result.equal_apply = _applied_in_memory(logs) == dump
    result.checks_s = round(time.monotonic() - checks0, 1)
    result.wall_s = round(time.monotonic() - wall0, 1)
    return result


# -- PostgreSQL schema, report and verdict ------------------------------------------------------


def fresh_schema(admin_url: str) -> tuple[str, str]:
    """Create an empty schema in the database of ``admin_url``; (its name, a URL that uses it)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"soak_{os.getpid()}_{int(time.time())}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text(f"CREATE SCHEMA {name}"))
    engine.dispose()
    url = make_url(admin_url).update_query_dict({"options": f"-csearch_path={name}"})
    return name, url.render_as_string(hide_password=False)


def drop_schema(admin_url: str, name: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text(f"DROP SCHEMA IF EXISTS {name} CASCADE"))
    engine.dispose()


def report(result: SoakResult) -> Iterator[str]:
    """The per-minute table, the totals and the verdicts as text lines."""
    yield (
        f"{'min':>3} {'produced':>9} {'applied':>9} {'lag p50':>8} {'lag p99':>8} {'lag max':>8} "
        f"{'lag s':>6} {'RSS min':>8} {'RSS max':>8} {'warm RSS':>8} {'restarts':>8} {'load':>5}"
    )
    for m in result.minutes():
        yield (
            f"{m['minute']:>3} {m['produced']:>9,} {m['applied']:>9,} {m['lag_p50']:>8,} {m['lag_p99']:>8,} "
            f"{m['lag_max']:>8,} {m['lag_s_max']:>6.1f} {m['rss_min_mb'] or 0:>6.1f}MB {m['rss_max_mb'] or 0:>6.1f}MB "
            f"{m['rss_warm_median_mb'] or 0:>6.1f}MB {m['restarts']:>8} {m['load1_avg']:>5.1f}"
        )
    lags = sorted(s.lag_patches for s in result.samples) or [0]
    lag_s = sorted(s.lag_seconds for s in result.samples) or [0.0]
    progress = [k.first_progress_s for k in result.kills if k.first_progress_s is not None]
    yield (
        f"total: {result.produced:,} patches produced (producer at most {result.producer_behind_s:.2f}s behind "
        f"schedule), {result.applied:,} applied, {len(result.kills)} kill -9, daemon exits otherwise: "
        f"{result.daemon_exits or 'none'}, final SIGTERM exit {result.final_exit}"
        + (
            f"; race daemon exits {result.racer_exits or 'none'}, final {result.racer_final_exit}"
            if result.racer_exits or result.racer_final_exit is not None
            else ""
        )
    )
    yield (
        f"lag: patches p50 {_pct(lags, 0.5):,} p99 {_pct(lags, 0.99):,} max {lags[-1]:,}; seconds p50 "
        f"{lag_s[len(lag_s) // 2]:.2f} p99 {lag_s[min(len(lag_s) - 1, int(len(lag_s) * 0.99))]:.2f} max {lag_s[-1]:.2f}; "
        f"catch-up after the producer stopped {result.catch_up_s:.1f}s; checks {result.checks_s:.1f}s; "
        f"wall {result.wall_s:.0f}s"
    )
    if progress:
        yield (
            f"restart to first applied unit: median {statistics.median(progress):.2f}s, max {max(progress):.2f}s "
            f"over {len(progress)} restarts"
        )
    mem = result.memory_verdict()
    if mem.get("flat") is None:
        yield f"memory: {mem['reason']}"
    else:
        yield (
            f"memory {'flat' if mem['flat'] else 'NOT flat'}: warmed-up daemon RSS median {mem['first_median_mb']} MB "
            f"(max {mem['first_max_mb']}) in the first {mem['window_s']}s, {mem['last_median_mb']} MB "
            f"(max {mem['last_max_mb']}) in the last {mem['window_s']}s of the kill -9 period; longest incarnation "
            f"{mem['longest']['seconds']}s ({mem['longest']['patches']:,} patches): {mem['longest']['first_mb']} -> "
            f"{mem['longest']['last_mb']} MB, max {mem['longest']['max_mb']}"
        )
    total, distinct = result.ps_patches
    yield (
        f"equality: dump {'==' if result.equal_reference else '!='} producer reference "
        f"({result.dump_quads:,} / {result.reference_quads:,} quads)"
        + (
            ""
            if result.equal_apply is None
            else f"; dump {'==' if result.equal_apply else '!='} the logs applied ({result.config['apply_check']})"
        )
        + f"; ps_patches {total:,} rows, {distinct:,} distinct ids; tracebacks in daemon.log: {result.tracebacks}"
    )


def ok(result: SoakResult) -> bool:
    """Whether the run kept every guarantee: nothing lost, nothing applied twice, clean exits."""
    return (
        result.equal_reference
        and result.equal_apply is not False
        and result.applied == result.produced
        and result.ps_patches == (result.produced, result.produced)
        and not result.daemon_exits
        and result.final_exit == 0
        and result.tracebacks == 0
        and (not result.config.get("race") or (result.racer_final_exit == 0 and not result.racer_exits))
    )


def _producer_main(argv: list[str] | None = None) -> int:
    """The producer subprocess :func:`run_soak` starts. Progress lines ``count clock`` on stdout."""
    import argparse

    parser = argparse.ArgumentParser(description="the soak's producer (started by run_soak)")
    parser.add_argument("--produce", metavar="DIR", required=True, type=Path)
    parser.add_argument("--reference", metavar="FILE", required=True, type=Path)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--rotate", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--entities", type=int, default=20_000)
    args = parser.parse_args(argv)

    def report(count: int, clock: float) -> None:
        sys.stdout.write(f"{count} {clock:.6f}\n")
        sys.stdout.flush()

    n, work, behind = produce(
        args.produce,
        rate=args.rate,
        seconds=args.minutes * 60,
        rotate=args.rotate,
        seed=args.seed,
        entities=args.entities,
        report=report,
    )
    args.reference.write_text("".join(work.nquads()))
    sys.stdout.write(f"done {n} {behind:.6f}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_producer_main())
