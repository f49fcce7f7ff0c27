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

run: $(STAMP)
	mkdir -p out
	$(BIN)/patchsync convert examples/library.rdfp out/library.jellyp
	$(BIN)/patchsync inspect out/library.jellyp
	$(BIN)/patchsync convert out/library.jellyp out/library.rdfp
	@echo "round trip: examples/library.rdfp -> out/library.jellyp -> out/library.rdfp"

lint: $(STAMP)
	$(BIN)/ruff check patchsync tests bench scripts
	$(BIN)/ruff format --check patchsync tests bench scripts
	$(BIN)/mypy

test: lint
	$(BIN)/patchsync conformance tests/conformance/patch/from_jelly/manifest.ttl tests/conformance/patch/to_jelly/manifest.ttl
	$(BIN)/pytest -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m bench.codec_bench

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
