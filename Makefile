# The two commands: `make demo` runs graphfuse on a bundled example, `make test` runs every
# test. Both create .venv when it is missing and install the project with pinned dependencies.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test pytest lit lint typecheck clean conformance

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/graphfuse stats examples/transformer_block.mlir
	mkdir -p build
	$(BIN)/graphfuse fuse examples/transformer_block.mlir --report --check \
		-o build/transformer_block.fused.mlir --dot build/transformer_block.fused.dot
	$(BIN)/graphfuse compile examples/transformer_block.mlir -o build/transformer_block.so
	$(BIN)/graphfuse run examples/transformer_block.mlir --random-inputs --check --time
	@echo "fused module: build/transformer_block.fused.mlir, picture: build/transformer_block.fused.dot,"
	@echo "library: build/transformer_block.so"

pytest: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n auto

lit: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/lit -v lit_tests

lint: $(STAMP)
	$(BIN)/ruff check --quiet .
	$(BIN)/ruff format --check --quiet graphfuse dialects passes lowering

test: pytest lit lint

clean:
	rm -rf $(VENV) build *.egg-info

# pyright strict (STYLE.md). Not part of `make test`: pyright comes from npm, not PyPI.
# The package maps top-level folders into graphfuse.*, which pyright cannot follow through
# an editable install, so it checks a tree of links laid out as the installed package.
typecheck: $(STAMP)
	rm -rf build/typecheck && mkdir -p build/typecheck/graphfuse
	for f in graphfuse/*; do ln -s "$(abspath .)/$$f" build/typecheck/graphfuse/; done
	for d in dialects passes lowering; do ln -s "$(abspath .)/$$d" build/typecheck/graphfuse/$$d; done
	cd build/typecheck && npx --yes pyright@1.1.414 --pythonpath "$(abspath $(BIN))/python" \
		$$(find -L graphfuse -name '*.py' -not -path '*/__pycache__/*' -not -path 'graphfuse/testing/*')

# ONNX's own backend conformance suite (every node case of onnx.backend.test whose inputs and
# outputs are tensors), each case imported, compiled for the CPU and compared with ONNX's
# expected outputs: prints the pass rate, the op types with a passing case and every case
# that does not pass, grouped by reason. `make test` runs the whole suite on the reference
# interpreter and a compiled sample of it (tests/frontend/test_onnx_conformance.py).
conformance: $(STAMP)
	mkdir -p build
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m graphfuse.testing.onnx_conformance \
		--json build/conformance.json

# The ONNX differential fuzzer (graphfuse/testing): random valid models checked against
# onnxruntime for MINUTES, failures reduced to small repros, counts and repros listed in
# build/fuzz/report.txt. Not part of `make test`, which runs a fixed-seed batch.
MINUTES ?= 30
.PHONY: fuzz
fuzz: $(STAMP)
	mkdir -p build/fuzz
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python tools/fuzz_onnx.py --minutes $(MINUTES) \
		--out build/fuzz
