"""The tail daemon's ``/$/metrics``, ``/$/healthz`` and ``/$/ready`` (``--metrics-listen``).

The metrics are parsed with ``prometheus_client.parser`` (the Prometheus text format,
<https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format>) and
checked against what the daemon did: patches, rows and the applied byte position of a
log the test wrote, and the error of a source that failed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import UsageError
from patchsync.tail import Tailer, TailOptions
from patchsync.tail.metrics import MetricsServer, parse_listen

from .nats_helpers import free_port, write_chain
from .process_helpers import stop, wait_for_value


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _samples(text: str) -> dict[tuple[str, str], float]:
    """``(sample name, source label) -> value`` of every sample in a scrape."""
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, s.labels.get("source", s.labels.get("error", "")))] = s.value
    return out


def test_metrics_match_what_the_daemon_applied(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "m", 20, size=3)
    target = SqlTarget(f"sqlite:///{tmp_path / 'r.db'}")
    tailer = Tailer([log], target, TailOptions())
    try:
        with MetricsServer(tailer, "127.0.0.1", 0) as server:
            base = f"http://127.0.0.1:{server.port}"
            reports = tailer.run_once()
            status, text = _get(base + "/$/metrics")
            assert status == 200
            got = _samples(text)
            name = reports[0].source
            assert got[("patchsync_tail_patches_total", name)] == 20
            # 3 adds per patch, and one delete in each patch after the first.
            assert got[("patchsync_tail_rows_total", name)] == 20 * 3 + 19
            assert got[("patchsync_tail_units_total", name)] == reports[0].result.units > 0
            assert got[("patchsync_tail_applied_position", name)] == log.stat().st_size
            assert got[("patchsync_tail_lag_bytes", name)] == 0
            assert got[("patchsync_tail_up", name)] == 1
            assert got[("patchsync_tail_retries_total", "")] == 0
            assert _get(base + "/$/ready") == (200, "ready\n")
            assert _get(base + "/$/healthz") == (200, "ok\n")
            status, body = _get(base + "/elsewhere")
            assert status == 404 and body.count("\n") == 1
    finally:
        tailer.close()
        target.close()


def test_a_failed_source_is_not_ready_and_its_error_is_a_metric(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "m", 3)
    with open(log, "ab") as f:
        f.write(b"\x05\xff\xff\xff\xff\x0f")  # a frame whose length runs past any limit
    target = SqlTarget(f"sqlite:///{tmp_path / 'r.db'}")
    tailer = Tailer([log], target, TailOptions(keep_going=True))
    try:
        with MetricsServer(tailer, "127.0.0.1", 0) as server:
            base = f"http://127.0.0.1:{server.port}"
            [report] = tailer.run_once()
            assert report.state == "failed"
            status, why = _get(base + "/$/ready")
            assert status == 503 and "failed" in why and why.count("\n") == 1
            families = {f.name: f for f in text_string_to_metric_families(_get(base + "/$/metrics")[1])}
            [error] = families["patchsync_tail_last_error_info"].samples
            assert error.labels["source"] == report.source and error.labels["error"] == report.error
            [up] = families["patchsync_tail_up"].samples
            assert up.value == 0
    finally:
        tailer.close()
        target.close()


@pytest.mark.parametrize("text", ["9464", "host:", ":80", "h:99999", "h:x"])
def test_listen_address_refused_in_one_line(text: str) -> None:
    with pytest.raises(UsageError, match="expected HOST:PORT"):
        parse_listen(text)


def test_listen_address_forms() -> None:
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:80") == ("::1", 80)


def test_cli_daemon_serves_metrics_while_tailing(tmp_path: Path, daemons: list[subprocess.Popen[str]]) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 10)
    port = free_port()
    cmd = [sys.executable, "-m", "patchsync", "tail", str(log), "--target", f"sqlite:///{tmp_path / 'r.db'}"]
    proc = subprocess.Popen([*cmd, "--metrics-listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    daemons.append(proc)
    base = f"http://127.0.0.1:{port}"

    def patches() -> float:
        try:
            text = _get(base + "/$/metrics")[1]
        except OSError:
            return -1
        return sum(v for (n, _), v in _samples(text).items() if n == "patchsync_tail_patches_total")

    wait_for_value(lambda: patches(), 10, "10 patches in the daemon's metrics")
    assert _get(base + "/$/ready")[0] == 200
    code, _ = stop(proc, signal.SIGTERM)
    assert code == 0
