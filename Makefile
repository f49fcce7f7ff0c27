# Two commands do all set-up on a fresh machine:
#   make run    set up .venv and run the main job (the example log, end to end)
#   make test   set up .venv and run every check and test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench proto clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The main job: replay the example patch logs into the embedded SQLite default, show
# where each log stands and dump the replicated state. Running it again applies nothing.
run: $(STAMP)
	mkdir -p out
	$(BIN)/patchsync apply examples/library.rdfp examples/library-more.rdfp --target sqlite:///out/library.db
	$(BIN)/patchsync status --target sqlite:///out/library.db
	$(BIN)/patchsync dump --target sqlite:///out/library.db

lint: $(STAMP)
	$(BIN)/ruff check patchsync tests bench scripts migrations
	$(BIN)/ruff format --check patchsync tests bench scripts migrations
	$(BIN)/mypy

# The upstream Jelly-RDF suite lives in the project's shared material beside the checkout.
RDF_SUITE := ../shared/conformance/rdf

test: lint
	$(BIN)/patchsync conformance tests/conformance/patch/from_jelly/manifest.ttl tests/conformance/patch/to_jelly/manifest.ttl
	$(BIN)/patchsync conformance $(RDF_SUITE)/from_jelly/manifest.ttl $(RDF_SUITE)/to_jelly/manifest.ttl
	$(BIN)/pytest -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m bench.codec_bench
	$(BIN)/python -m bench.rdf_bench
	$(BIN)/python -m bench.apply_bench
	$(BIN)/python -m bench.capture_bench

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
