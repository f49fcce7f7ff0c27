"""The Spark integration's set-up checks: one-line errors for a missing extra or Java (no JVM started)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from patchsync.errors import UsageError

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.spark import _env


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "pyarrow" else real(name))
    with pytest.raises(UsageError, match=r"needs pyarrow: pip install 'patchsync\[spark\]'"):
        _env.check_environment()


def test_missing_java_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="needs a Java 17\\+ runtime"):
        _env.check_environment()


def test_workers_run_this_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    _env.configure_python()
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def test_public_api() -> None:
    import patchsync.spark as ps

    assert set(ps.__all__) >= {"register", "replay", "compact", "write_compact", "write_replay", "codec_errors"}
    assert all(hasattr(ps, name) for name in ps.__all__)


def test_the_pure_codec_choice_reaches_remote_executors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATCHSYNC_PURE", "1")
    assert _env.worker_env_conf() == {"spark.executorEnv.PATCHSYNC_PURE": "1"}
    monkeypatch.setenv("PATCHSYNC_PURE", "0")
    assert _env.worker_env_conf() == {}
    monkeypatch.delenv("PATCHSYNC_PURE")
    assert _env.worker_env_conf() == {}
