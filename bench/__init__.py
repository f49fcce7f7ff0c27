"""Benchmarks for patchsync (see bench/README.md)."""
