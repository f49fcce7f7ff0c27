"""Every consumer reads the units ``apply`` reads: one differential property over generated logs.

The logs (``tests/workloads/unit_logs.py``) hold implicit units before ``TX``, ``TX … TC``,
``TX … TA``, rows after ``TC``, empty patches, prefix rows, blank nodes, named graphs,
RDF-star and sometimes a torn tail. The state ``apply`` leaves in the reference target
(``MemoryTarget``) must equal the state from ``apply(compact(log))``, from the rdflib
``patchsync-jellyp`` parser and from ``spark-replay``, and ``reverse`` must undo ``apply``
exactly; a torn log fails each of them with the same decode error. Units as
docs/design.md §2 states them; RDF Patch's transactions:
<https://afs.github.io/rdf-delta/rdf-patch.html> ("Transactions"), Jelly-Patch's:
<https://w3id.org/jelly/dev/specification/patch/> ("Transactions").

Quick here; ``scripts/fuzz.py units --seconds N`` runs the single-process part as long as
asked (the ``units`` fuzz target).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .workloads.unit_logs import GeneratedLog, check, spark_quads, unit_logs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=unit_logs())
def test_every_consumer_reads_the_units_apply_reads(log: GeneratedLog) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        check(log, Path(workdir))


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(logs=st.lists(unit_logs(), min_size=4, max_size=4))
def test_spark_replay_reads_the_units_apply_reads(spark: Any, logs: list[GeneratedLog]) -> None:
    # A few examples of four logs each keep the JVM's share of the property small.
    with tempfile.TemporaryDirectory() as workdir:
        for index, log in enumerate(logs):
            folder = Path(workdir) / str(index)
            folder.mkdir()
            state = check(log, folder)
            quads, error = spark_quads(spark, folder / "log.jellyp")
            if log.torn and error is not None:
                assert error.source == str(folder / "log.jellyp") and error.offset is not None
            else:
                assert error is None, f"spark-replay failed a log apply took whole: {error}"
                assert quads == state[0], "spark-replay differs from apply(log)"
