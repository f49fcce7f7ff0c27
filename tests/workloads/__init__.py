"""Generated workloads the tests and the benchmarks share (``bench/`` imports them; tests never
import ``bench/``): an RDF dataset of every term kind, a large patch log written streaming,
and the soak harness (producer, ``patchsync tail`` killed again and again, checks)."""
