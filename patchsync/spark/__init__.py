"""Patch logs at data-lake scale: PySpark data sources, replay and compaction.

Needs the ``spark`` extra (``pip install 'patchsync[spark]'``) and a Java runtime;
:func:`session` checks both and fails with a one-line :class:`~patchsync.errors.UsageError`.
Importing this package imports pyspark, so ``patchsync`` itself never imports it.

* :func:`register` adds the formats ``jelly-patch`` (change rows of ``.jellyp`` logs),
  ``jelly`` (quads of Jelly-RDF snapshots), ``patchsync-nquads`` and ``patchsync-rdf`` (quads
  of RDF files of every format ``patchsync convert`` reads) to a SparkSession;
* :func:`replay` gives the state after a sequence of logs as a DataFrame of quads;
  :func:`replay_into` keeps it in a state directory of versions, folding in only what was
  committed since the last run (:mod:`._incremental`), and :func:`follow` runs that as a
  streaming query; :func:`state_lock` holds a state directory's lock (one writer at a time);
* ``spark.readStream.format("jelly-patch")`` follows growing logs (:mod:`._stream`), or a
  NATS JetStream stream given as ``load("nats://HOST:PORT/STREAM")`` (:mod:`._remote_stream`);
* :func:`compact` gives one net patch equivalent to the logs; :func:`write_compact` writes
  it as a ``.jellyp`` file;
* :func:`codec_errors` turns a job failed by a bad file back into the codec's
  :class:`~patchsync.errors.DecodeError`.

One file is one partition: a log's decoder state runs through the whole file, so a file is
never split (docs/design.md §7). Spark's parallelism is the number of files.
"""

from patchsync.spark._env import check_extra

# Fail on import with the one-line install hint rather than a ModuleNotFoundError deep inside.
check_extra()

from patchsync.spark._env import DEFAULT_MASTER, build_session, check_environment, configure_python  # noqa: E402
from patchsync.spark._errors import WorkerDecodeError, codec_errors  # noqa: E402
from patchsync.spark._incremental import StateVersion, current_version, follow, read_state, replay_into  # noqa: E402
from patchsync.spark._lock import state_lock  # noqa: E402
from patchsync.spark._replay import (  # noqa: E402
    change_rows,
    compact,
    iter_quads,
    nquads_lines,
    replay,
    snapshot,
    snapshot_files,
    write_compact,
    write_replay,
)
from patchsync.spark._sources import (  # noqa: E402
    CHANGE_SCHEMA,
    QUAD_SCHEMA,
    JellyDataSource,
    NQuadsDataSource,
    RdfDataSource,
    decode_change_batches,
    decode_jelly_batches,
)
from patchsync.spark._stream import JellyPatchDataSource, register  # noqa: E402

#: Alias of :func:`build_session`: a SparkSession with the data sources registered.
session = build_session

__all__ = [
    "CHANGE_SCHEMA",
    "DEFAULT_MASTER",
    "QUAD_SCHEMA",
    "JellyDataSource",
    "JellyPatchDataSource",
    "NQuadsDataSource",
    "RdfDataSource",
    "StateVersion",
    "WorkerDecodeError",
    "build_session",
    "change_rows",
    "check_environment",
    "codec_errors",
    "compact",
    "configure_python",
    "current_version",
    "decode_change_batches",
    "decode_jelly_batches",
    "follow",
    "iter_quads",
    "nquads_lines",
    "read_state",
    "register",
    "replay",
    "replay_into",
    "session",
    "snapshot",
    "snapshot_files",
    "state_lock",
    "write_compact",
    "write_replay",
]
