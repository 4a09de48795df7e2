# Two commands for a fresh machine:  `make run`  and  `make test`  (see README.md).
# Both create .venv with a Python >= 3.12 found on this machine and install pinned dependencies.

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
CHROMIUM := /usr/bin/chromium
BWRAP  := /usr/bin/bwrap

# The first interpreter >= 3.12 among $PYTHON, python3.13, python3.12, python3 and pyenv's versions.
FIND_PYTHON := for c in "$$PYTHON" python3.13 python3.12 python3 \
	$$(ls -d "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do \
	  [ -n "$$c" ] || continue; \
	  p=$$(command -v "$$c" 2>/dev/null) || continue; \
	  "$$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo "$$p"; exit 0; }; \
	done; echo "no Python >= 3.12 found: install one or set PYTHON=/path/to/python3.12" >&2; exit 1

.PHONY: run test lint typecheck pytest venv bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || { py=$$($(FIND_PYTHON)) && echo "creating $(VENV) with $$py" && "$$py" -m venv $(VENV); }
	@# uv resolves and installs the pinned set in seconds where pip takes over a minute; from 0.10
	@# it honours pyproject's exclude-dependencies (no PyTorch: docs/decisions/0006).
	$(PY) -m pip install --quiet --disable-pip-version-check "uv>=0.10"
	@# --compile-bytecode: these machines set PYTHONDONTWRITEBYTECODE, so without .pyc files every
	@# process (each test's worker and server among them) compiled its imports anew: ~4 s each.
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

# The project's own .pyc files, for the same reason (only changed files are compiled again).
BYTECODE := $(PY) -m compileall -q -j 0 -x '/\.(venv|data|git)/' .

run: $(STAMP) $(BWRAP)
	@$(BYTECODE)
	$(PY) manage.py up $(ARGS)

# On CI (CI set) the embedded servers are stopped afterwards, pass or fail; on a developer
# machine they stay up for the next run (or a `make run` in another terminal).
test: $(STAMP)
	@status=0; $(MAKE) --no-print-directory lint typecheck pytest pytest-pgbouncer || status=$$?; \
	if [ -n "$$CI" ]; then $(PY) manage.py embedded stop; $(STOP_SERIAL_SERVERS); fi; exit $$status

lint: $(STAMP)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy .

# The suite on PYTEST_WORKERS pytest-xdist processes and, at the same time, the tests marked
# serial (they stop or kill PostgreSQL or Redis) on embedded servers of their own, .data/serial
# (tests/run.py). 3 workers were the fastest on a 2-core CI VM: the tests mostly wait on workers,
# servers and the browser. PYTEST_ARGS goes to both runs (e.g. PYTEST_ARGS="-x tests/api");
# `make test PYTEST_WORKERS=0` runs one plain pytest instead, one test at a time.
PYTEST_WORKERS ?= 3
STOP_SERIAL_SERVERS := AGENTDESK_DATA_DIR=$(CURDIR)/.data/serial $(PY) manage.py embedded stop

pytest: $(STAMP) $(CHROMIUM) $(BWRAP)
	@$(BYTECODE)
	$(PY) -m tests.run $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The browser tests drive Debian's Chromium (Playwright's own browser download does not work
# offline); installed once, as root or through sudo.
$(CHROMIUM):
	@echo "installing Debian's chromium for the browser tests (tests/browser/)"
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null

# execute_python's sandbox (tools/sandbox/, README "Python sandbox") is Debian's bubblewrap.
$(BWRAP):
	@echo "installing Debian's bubblewrap for the Python sandbox (tests/tools/sandbox/)"
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap >/dev/null

# tests/deploy/ renders deploy/kubernetes with `kubectl kustomize` (kubectl >= 1.27: Kustomize
# components): installed when missing from the apt sources' `kubectl` package; where none has
# it, those tests are skipped and say why.
KUBECTL := /usr/bin/kubectl
pytest: $(KUBECTL)
$(KUBECTL):
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	{ $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq kubectl >/dev/null; } \
	|| echo "kubectl could not be installed: tests/deploy/ are skipped"

bench: $(STAMP)
	$(VENV)/bin/uv pip install --quiet --python $(PY) -c constraints.txt -e ".[dev,bench]"
	$(PY) -m bench.step_overhead
	$(PY) -m bench.peer_langgraph
	$(PY) -m bench.concurrency
	$(PY) -m bench.throughput
	$(PY) -m bench.floor_throughput
	$(PY) -m bench.cpu_split
	$(PY) -m bench.live_latency
	$(PY) -m bench.token_streaming

# The multi-node test (tests/cluster/) makes network namespaces with iproute2's `ip`: installed
# when missing, as root only (as anyone else that test is skipped: namespaces need root).
IPROUTE2 := /usr/sbin/ip
pytest: $(IPROUTE2)
$(IPROUTE2):
	@if [ "$$(id -u)" = 0 ]; then echo "installing iproute2 for tests/cluster/"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; fi

# PgBouncer in transaction pooling mode in front of the embedded PostgreSQL (README "PgBouncer"):
# Debian's pgbouncer, installed when missing (as root or through sudo). After the suite, the
# tests that would show a session leaking through the pooler run again with the runtime role's
# connections (tests, workers, web server) going through it: the RLS matrix, the runtime's
# durability under SIGKILL, the concurrent approval decisions and the pooler's own tests. The
# durability tests with one provider's wire format only (the database work is the same for all).
PGBOUNCER := /usr/sbin/pgbouncer
PGBOUNCER_TESTS := tests/core/test_row_level_security.py tests/core/test_pgbouncer.py \
	tests/approvals/test_concurrent_decisions.py tests/agents/runtime/test_durability.py
.PHONY: pytest-pgbouncer
pytest: $(PGBOUNCER)
pytest-pgbouncer: $(STAMP) $(PGBOUNCER)
	AGENTDESK_EMBEDDED_PGBOUNCER=1 $(PY) -m pytest -n $(PYTEST_WORKERS) -m "not serial" \
		-k "not anthropic and not google" $(PGBOUNCER_TESTS)
$(PGBOUNCER):
	@echo "installing Debian's pgbouncer for the tests through it (make pytest-pgbouncer)"
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq pgbouncer >/dev/null

clean:
	-$(PY) manage.py embedded stop
	-$(STOP_SERIAL_SERVERS)
	rm -rf $(VENV) .data .mypy_cache .ruff_cache .pytest_cache
