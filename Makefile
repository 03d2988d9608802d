# The two commands of the README:
#   make demo   set up (a virtualenv in .venv) and run the paper's chain, verified
#   make test   set up and run the whole test suite (lint, types, tests)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: demo test lint iperf3 bench proto clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(PY) -m semiactive demo

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy .

# iperf3 loads the network of experiment 3 (coordinator/netlab.py): installed
# from Debian when missing and root; otherwise its tests skip, saying why.
iperf3:
	@command -v iperf3 >/dev/null || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3; }

test: lint iperf3
	PYTHONHASHSEED=0 $(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/engine_throughput.py
	$(PY) bench/cluster_throughput.py

proto: $(STAMP)
	$(PY) -m semiactive.wire

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .hypothesis build *.egg-info
