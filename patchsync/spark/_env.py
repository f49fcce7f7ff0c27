"""Checks and session setup for the Spark integration (driver side only).

Nothing here runs in the workers. The checks turn the two usual set-up failures, a missing
``spark`` extra and a missing Java runtime, into one-line :class:`UsageError`\\ s before a
JVM is started, instead of a py4j traceback.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from patchsync.codec import backend
from patchsync.errors import UsageError

#: Master used when none is given: two local cores, as the tests and the CLI default.
DEFAULT_MASTER = "local[2]"


def check_extra() -> None:
    """Raise :class:`UsageError` unless pyspark and pyarrow are installed."""
    missing = [name for name in ("pyspark", "pyarrow") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"the Spark integration needs {' and '.join(missing)}: pip install 'patchsync[spark]'")


def check_environment() -> None:
    """Raise :class:`UsageError` unless pyspark, pyarrow and a Java runtime are available."""
    check_extra()
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else None
    if not (java is not None and java.exists()) and shutil.which("java") is None:
        raise UsageError("the Spark integration needs a Java 17+ runtime: install one or set JAVA_HOME")


def configure_python() -> None:
    """Make Spark's Python workers run this interpreter (so they can import patchsync)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def worker_env_conf() -> dict[str, str]:
    """Session settings that give the executors this process's choice of codec.

    In local mode the Python workers inherit the driver's environment, ``PATCHSYNC_PURE``
    included; executors elsewhere get only what ``spark.executorEnv.*`` passes them.
    """
    if backend.pure_forced():
        return {"spark.executorEnv.PATCHSYNC_PURE": os.environ["PATCHSYNC_PURE"]}
    return {}


@contextmanager
def _stderr_to_devnull() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _quiet_log_config() -> str:
    return str(Path(__file__).with_name("log4j2-quiet.properties"))


def build_session(
    master: str = DEFAULT_MASTER, *, app_name: str = "patchsync", quiet: bool = False, **conf: str
) -> Any:
    """A SparkSession with patchsync's data sources registered.

    ``quiet`` silences Spark's own logging (the CLI reports errors itself, in one line).
    ``conf`` entries are passed to the builder as they are. No package is fetched from
    Maven: the data sources are pure Python, so the session needs only pyspark's own jars.
    """
    check_environment()
    configure_python()
    from pyspark.sql import SparkSession

    from patchsync.spark._stream import register

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        # Change logs are few large partitions; Spark's default of 200 shuffle partitions
        # would mostly schedule empty tasks on a small machine.
        .config("spark.sql.shuffle.partitions", conf.pop("spark.sql.shuffle.partitions", "8"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if quiet:
        option = f"-Dlog4j.configurationFile=file:{_quiet_log_config()}"
        builder = (
            builder.config("spark.driver.extraJavaOptions", option)
            .config("spark.executor.extraJavaOptions", option)
            .config("spark.ui.showConsoleProgress", "false")
        )
    for key, value in {**worker_env_conf(), **conf}.items():
        builder = builder.config(key, value)
    if quiet:
        # The JVM inherits file descriptor 2 when pyspark launches it, and prints start-up
        # notices there before any log configuration applies; give it /dev/null instead.
        with _stderr_to_devnull():
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("OFF")
    register(spark)
    return spark
