# Two commands do all set-up on a fresh machine:
#   make run    set up .venv and run the main job (the example log, end to end)
#   make test   set up .venv and run every check and test, on every core; prints its wall time
# and one for the edit loop:
#   make check  lint and the unit tests but the slow ones, in parallel (1-2 minutes; tests/README.md)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check lint conformance pytest bench proto clean native

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The compiled extensions, one per layer (setup.py): the codec core (patchsync/codec/*.pyx)
# and the SQL target's speed-ups (patchsync/apply/targets/sql/*.pyx), rebuilt in place when a
# .pyx or .pxi changes (pip install -e builds them once; an editable install does not rebuild
# them by itself).
NATIVE_SOURCES := $(wildcard patchsync/codec/*.pyx patchsync/codec/*.pxi patchsync/apply/targets/sql/*.pyx patchsync/apply/targets/sql/*.pxi)
NATIVE_STAMP := $(VENV)/.native
$(NATIVE_STAMP): $(STAMP) setup.py $(NATIVE_SOURCES)
	$(BIN)/python setup.py --quiet build_ext --inplace
	touch $(NATIVE_STAMP)

native: $(NATIVE_STAMP)

# The main job: a producer appends chained patches to rotated segments in out/logs while
# the tail daemon keeps a SQLite replica in step; the daemon is then stopped (SIGTERM) and
# restarted with --once, which resumes from its checkpoint, and the replica is checked
# against a plain `patchsync apply` of the same logs. Running it again starts over.
REPLICA := sqlite:///out/replica.db

run: $(NATIVE_STAMP)
	rm -rf out/logs out/replica.db* out/check.db*
	mkdir -p out
	$(BIN)/python examples/producer.py out/logs --rate 100 --count 500 --rotate 200 & producer=$$!; \
	$(BIN)/patchsync tail out/logs --target $(REPLICA) --log-interval 2 & daemon=$$!; \
	wait $$producer; sleep 1; kill -TERM $$daemon; wait $$daemon
	$(BIN)/patchsync tail out/logs --target $(REPLICA) --once
	$(BIN)/patchsync status --target $(REPLICA)
	$(BIN)/patchsync apply --no-progress out/logs/*.jellyp --target sqlite:///out/check.db > /dev/null
	$(BIN)/patchsync dump --target $(REPLICA) | sort > out/replica.nq
	$(BIN)/patchsync dump --target sqlite:///out/check.db | sort > out/check.nq
	cmp out/replica.nq out/check.nq && echo "replica equals the log: $$(wc -l < out/replica.nq) quads"

lint: $(NATIVE_STAMP)
	$(BIN)/ruff check patchsync tests bench scripts migrations
	$(BIN)/ruff format --check patchsync tests bench scripts migrations
	$(BIN)/mypy

# The upstream Jelly-RDF suite, vendored (tests/data/upstream/README.md).
RDF_SUITE := tests/data/upstream/jelly-rdf

# Both conformance suites run twice: on the compiled codec core, then on the pure-Python
# codec (PATCHSYNC_PURE=1), the reference and the fallback of an install without a compiler.
conformance: $(NATIVE_STAMP)
	$(BIN)/patchsync conformance --coverage conformance/patch/from_jelly/manifest.ttl conformance/patch/to_jelly/manifest.ttl
	$(BIN)/patchsync conformance $(RDF_SUITE)/from_jelly/manifest.ttl $(RDF_SUITE)/to_jelly/manifest.ttl
	PATCHSYNC_PURE=1 $(BIN)/patchsync conformance conformance/patch/from_jelly/manifest.ttl conformance/patch/to_jelly/manifest.ttl
	PATCHSYNC_PURE=1 $(BIN)/patchsync conformance $(RDF_SUITE)/from_jelly/manifest.ttl $(RDF_SUITE)/to_jelly/manifest.ttl

# pytest-xdist workers: two a core by default, since most tests spend most of their time
# waiting on a child process, a server or a clock, not on the CPU (each worker has its own
# PostgreSQL database and NATS stream names, tests/conftest.py).
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
PYTEST := $(BIN)/pytest -p no:cacheprovider
PARALLEL := -n $(WORKERS) --dist loadgroup
# pytest exits 5 when a selection holds no test: not a failure here.
NO_TESTS_OK := || [ $$? -eq 5 ]

# Every test: all but the `serial` ones in parallel, then those alone (they restart a server
# the others use).
pytest: $(NATIVE_STAMP)
	$(PYTEST) $(PARALLEL) -m "not serial" --durations=15 $(NO_TESTS_OK)
	$(PYTEST) -m serial $(NO_TESTS_OK)

# The wall time printed includes setting up .venv when that is needed (a clean clone).
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory $(NATIVE_STAMP) lint conformance pytest; status=$$?; \
	echo "make test: exit $$status, wall time $$(( $$(date +%s) - start )) s"; exit $$status

# The edit loop: lint, then the unit tests (but the slow ones) in parallel.
check:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory $(NATIVE_STAMP) lint && $(PYTEST) $(PARALLEL) -m "unit and not slow"; status=$$?; \
	echo "make check: exit $$status, wall time $$(( $$(date +%s) - start )) s"; exit $$status

# Every bench, full size, and docs/benchmarks.md written from their output (bench/__main__.py;
# hours: `python -m bench --quick` runs the quick set in minutes).
bench: $(NATIVE_STAMP)
	$(BIN)/python -m bench

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache build patchsync/codec/*.so patchsync/codec/_native*.c \
		patchsync/apply/targets/sql/*.so patchsync/apply/targets/sql/_native*.c
