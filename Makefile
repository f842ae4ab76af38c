# Two entry points, each of which sets up everything it needs on a fresh machine:
#   make demo   - virtual environment, install, then the main job (bench demo)
#   make test   - virtual environment, install, then lint, tests and the CI regression checks
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the environment: what every target but install needs
INSTALLED := $(VENV)/.installed
# The CPU build 2.13.0 where there is no GPU (PyPI has no CPU-only build of newer releases: its
# Linux torch 2.15.0 is the CUDA build, several GB, also tested: docs/stack.md); on a CUDA machine
# use e.g. TORCH_SPEC="torch==2.15.0".
TORCH_SPEC ?= torch==2.13.0
# Tests and CI read the real shared datasets; `make demo` uses $BENCH_DATA_DIR only if you set it.
TEST_DATA ?= $(if $(BENCH_DATA_DIR),$(BENCH_DATA_DIR),$(abspath ../shared/data))
TEST_RESULTS ?= $(abspath .ci-results)

.PHONY: install demo test quick lint layers typecheck reference pytest gpu-bench-tests regression throughput gpu-check gpu-bench gpu-bench-cpu gpu-carry precision clean

# `make install` is the environment and the bytecode of what bench imports (below); the other
# targets need only the environment: they compile each module once, at its first import.
install: $(INSTALLED) $(VENV)/.bytecode

# uv resolves and installs the same packages as pip in about a third of the time (itself
# installed by pip into the venv). uv does not read pip.conf: it takes pip's find-links from
# $$PIP_FIND_LINKS; `make INSTALL_WITH=pip install` uses pip alone. Neither compiles bytecode
# (see below).
INSTALL_WITH ?= uv
ifeq ($(INSTALL_WITH),uv)
PIP_INSTALL = $(BIN)/uv pip install --quiet --python $(BIN)/python \
	$(addprefix --find-links ,$(PIP_FIND_LINKS))
else
PIP_INSTALL = $(BIN)/python -m pip install --quiet --no-compile
endif

# Bytecode: every command make runs writes a module's compiled form at its first import (Python's
# default, even where the environment sets PYTHONDONTWRITEBYTECODE), so each module is compiled
# once, by whichever command imports it first. Compiling every installed file ahead instead (pip's
# default, uv --compile-bytecode) is 17k files and 46 CPU-seconds before anything else can start
# (26 s on 2 cores), and bench imports about 3,600 of them.
export PYTHONDONTWRITEBYTECODE :=

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip $(if $(filter uv,$(INSTALL_WITH)),uv)
	$(PIP_INSTALL) "$(TORCH_SPEC)" -e ".[all]"
	touch $@

# For bench run outside make where PYTHONDONTWRITEBYTECODE is set: the stack the neural rankers
# import (scikit-learn through sentence-transformers) compiled once, about 15 s, or each such
# command would compile it again.
$(VENV)/.bytecode: $(INSTALLED)
	$(BIN)/python -c "import torch, transformers, sentence_transformers, accelerate, sklearn, bench.cli.main, rankers.families.encoder"
	touch $@

demo: $(INSTALLED)
	$(BIN)/bench demo

lint: $(INSTALLED) layers typecheck reference
	$(BIN)/ruff check bench rankers tests
	$(BIN)/ruff format --check bench rankers tests

# Static types of bench and rankers (settings: [tool.mypy] in pyproject.toml).
typecheck: $(INSTALLED)
	$(BIN)/mypy bench rankers

# The layer rule of bench.FOUNDATION (rankers import only bench's foundation, which imports
# neither rankers nor the application; no import cycles among rankers modules), read from source.
layers: $(INSTALLED)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_layers.py

# The result tables of README.md and docs/*.md against the records they are rendered from (no model is loaded);
# `bench reference render` rewrites them after a record changes.
reference: $(INSTALLED)
	$(BIN)/bench reference check

# A small real regression: rankers on the shared sets, checked against results/expected/ci.yaml.
regression: $(INSTALLED)
	BENCH_DATA_DIR=$(TEST_DATA) BENCH_RESULTS_DIR=$(TEST_RESULTS) HF_HUB_OFFLINE=1 bash .ci/regression.sh

PYTEST = BENCH_DATA_DIR=$(TEST_DATA) HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider
# PYTEST_ARGS: more pytest arguments (make test passes the --ignore of GPU_BENCH_TESTS)
pytest: $(INSTALLED)
	$(PYTEST) --durations=25 $(PYTEST_ARGS)

# The in-process tests of what gpu-bench runs: the CUDA path checked on the CPU (scores against
# the CPU's float32, host reads, graphs and casts with fakes) and bench latency. make test runs
# them after gpu-bench-cpu in its background job, not in its pytest.
GPU_BENCH_TESTS ?= tests/test_gpu.py tests/test_gpu_path.py tests/test_host_reads.py \
	tests/test_latency_bench.py tests/test_latency_precisions.py
gpu-bench-tests: $(INSTALLED)
	$(PYTEST) --durations=5 $(GPU_BENCH_TESTS)

# The CI regression runs beside lint and pytest (its log in $(REGRESSION_LOG), printed at the
# end), then the prepared GPU run on the CPU (gpu-bench-cpu) and the tests of what it runs
# (gpu-bench-tests, left out of this pytest). The machine is busy on both cores until the
# background job ends; its last part takes the core the foreground pytest alone would leave idle
# (each part's end is printed, seconds after the start). Failing lint stops the background job
# (its own process group) and pytest is not run; a part of the background job failing does not
# stop the next (--keep-going); any of them failing fails `make test`.
# OMP_WAIT_POLICY=PASSIVE: a waiting OpenMP thread sleeps instead of spinning on the core the
# other job needs (results do not depend on it).
REGRESSION_LOG ?= $(abspath .ci-regression.log)
test: $(INSTALLED)
	@echo "CI regression, gpu-bench-cpu and gpu-bench-tests started beside lint and pytest (log: $(REGRESSION_LOG))"
	@export OMP_WAIT_POLICY=PASSIVE; start=$$(date +%s); \
	setsid sh -c '$(MAKE) --no-print-directory --keep-going regression gpu-bench-cpu gpu-bench-tests; s=$$?; \
	  echo "background job ended at +$$(( $$(date +%s) - '$$start' )) s"; exit $$s' \
	  > $(REGRESSION_LOG) 2>&1 & regression=$$!; \
	if ! $(MAKE) --no-print-directory lint; then \
	  kill -TERM -$$regression 2>/dev/null; wait $$regression; exit 1; \
	fi; \
	$(MAKE) --no-print-directory pytest PYTEST_ARGS="$(addprefix --ignore=,$(GPU_BENCH_TESTS))"; \
	tests=$$?; echo "pytest ended at +$$(( $$(date +%s) - start )) s"; \
	wait $$regression; status=$$?; \
	echo "---- CI regression, gpu-bench-cpu, gpu-bench-tests (exit status $$status) ----"; \
	cat $(REGRESSION_LOG); \
	test $$tests -eq 0 && test $$status -eq 0

# The inner loop: lint and the tests that start no Python process (-m 'not processes'), in
# QUICK_WORKERS pytest-xdist workers (pytest 155-173 s with 2 on 2 idle cores, 225 s in one).
# CI runs everything, in one worker (`make test`): its process tests time real commands and
# start ranks of their own.
QUICK_WORKERS ?= 2
quick: lint
	$(PYTEST) -m "not processes" -n $(QUICK_WORKERS) --durations=10

# monoBERT scoring throughput at N = 100 on CPU with 1 and with 2 processes, 1 thread each
# (`bench latency --processes`, throughput mode): two latency records under
# $(THROUGHPUT_RESULTS)/latency/wikiqa/, the aggregate pairs/s printed under each table. Several
# minutes on 2 cores; run it on an otherwise idle machine.
THROUGHPUT_RESULTS ?= $(abspath results)
THROUGHPUT_ARGS ?= -d wikiqa --rankers monobert --n-items 100 --batch-sizes monobert=32 --threads 1
throughput: $(INSTALLED)
	for p in 1 2; do \
	  OMP_WAIT_POLICY=PASSIVE TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 \
	  BENCH_DATA_DIR=$(TEST_DATA) BENCH_RESULTS_DIR=$(THROUGHPUT_RESULTS) \
	  $(BIN)/bench latency $(THROUGHPUT_ARGS) --processes $$p || exit 1; \
	done

# The machine's own python on a lent CUDA machine (no .venv there: docs/scaling.md#gpu).
GPU_PYTHON ?= python3
GPU_RESULTS ?= $(abspath gpu-results)
# Accuracy per scoring precision (a benchmark: trains once per dataset, then scores each ranker in
# each precision; .ci/precision.sh says which variables choose datasets, rankers, dtypes, device).
precision: $(INSTALLED)
	PYTHON=$(BIN)/python BENCH_DATA_DIR=$(TEST_DATA) bash .ci/precision.sh

# The one prepared run for a lent CUDA machine (.ci/gpu-bench.sh says what it runs): latency tables
# first (N = 10, 100, 700; MiniLM-L6 and distilbert-6l; float32, tf32, bfloat16; monoBERT,
# CROSS-JEM union, the sentence-transformers peer), a profiler pass, the paper-style table, then
# the GPU suite; everything under $(OUT), each step under its own timeout. Uses the machine's own
# python. `GPU_BENCH_DEVICE=cpu make gpu-bench QUICK=1` runs the same script on the CPU
# (.venv's python; make test runs it so the script keeps working).
OUT ?= $(abspath gpu-bench-out)
QUICK ?= 0
GPU_BENCH_DEVICE ?= cuda
GPU_BENCH_PYTHON = $(if $(filter cpu,$(GPU_BENCH_DEVICE)),$(BIN)/python,$(GPU_PYTHON))
gpu-bench:
	PYTHON=$(GPU_BENCH_PYTHON) OUT=$(OUT) QUICK=$(QUICK) GPU_BENCH_DEVICE=$(GPU_BENCH_DEVICE) \
	  BENCH_DATA_DIR=$(TEST_DATA) bash .ci/gpu-bench.sh

# The same script on the CPU, QUICK (what make test runs so that it keeps working), its output
# under $(TEST_RESULTS)/gpu-bench/.
gpu-bench-cpu: $(INSTALLED)
	$(MAKE) --no-print-directory gpu-bench GPU_BENCH_DEVICE=cpu QUICK=1 OUT=$(TEST_RESULTS)/gpu-bench

# The wheels and float16 MiniLM weights a GPU machine without network lacks, into gpu-carry/
# (at most 64 MiB; docs/scaling.md#gpu).
gpu-carry: $(INSTALLED)
	PYTHON=$(BIN)/python bash .ci/gpu-carry.sh

# The longer study for a longer loan (20-30 minutes; run `make gpu-bench` first): the GPU suite,
# the attention kernel each layout gets, then the CUDA latency of monoBERT and every CROSS-JEM
# row layout at N=100 and 700 in float32, bfloat16 and float16, records under
# $(GPU_RESULTS)/latency/wikiqa/. Kept beside gpu-bench for what that one does not measure: the
# other layouts, float16 and the attention kernels.
gpu-check:
	PYTHON=$(GPU_PYTHON) BENCH_RESULTS_DIR=$(GPU_RESULTS) BENCH_DATA_DIR=$(TEST_DATA) bash .ci/gpu-check.sh

clean:
	rm -rf $(VENV) .ci-results $(REGRESSION_LOG)
