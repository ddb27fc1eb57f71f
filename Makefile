PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pip byte-compiles every file of every installed package (~60 CPU-s here, most never imported);
# --no-compile skips that, and Python compiles what is imported, once: our commands let it write
# the .pyc files even where the environment says not to (PYTHONDONTWRITEBYTECODE), or every
# process of the suite would compile jax, scipy and pandas again (~12 CPU-s each).
COMMA := ,
RUN := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python

.PHONY: demo test test-all bench install clean

# The venv is made without pip (ensurepip byte-compiles all of pip: ~8 CPU-s); pip runs from
# Python's own bundled wheel to fetch uv, and is installed into the venv only where pip itself
# has to do the install.
$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV) || python3 -m venv --without-pip $(VENV)

# uv installs the same requirements for about half pip's CPU time (16 CPU-s against 32 here, cold
# caches); where uv cannot be had or cannot reach an index, pip does the install. (-qq: pip's
# warnings about the machine's own index configuration are not ours to print.)
EXTRAS := test,oracles,experiments
BUNDLED_PIP := import ensurepip, glob, os; \
  print(sorted(glob.glob(os.path.join(os.path.dirname(ensurepip.__file__), '_bundled', 'pip-*.whl')))[-1])
define INSTALL
	{ { test -x $(BIN)/uv || $(BIN)/python "$$($(BIN)/python -c "$(BUNDLED_PIP)")/pip" install -qq --no-compile uv; } \
	  && $(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[$(1)]'; } \
	|| { $(BIN)/python -m ensurepip --upgrade >/dev/null \
	  && $(BIN)/python -m pip install --quiet --upgrade pip \
	  && $(BIN)/python -m pip install --quiet --no-compile -e '.[$(1)]'; }
endef

$(STAMP): $(BIN)/python pyproject.toml
	$(call INSTALL,$(EXTRAS))
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(RUN) -m dpmcmc.demo

test: $(STAMP)
	$(RUN) -m pytest -q

test-all: $(STAMP)
	$(RUN) -m pytest -q -m ''

bench: $(STAMP)
	$(call INSTALL,$(EXTRAS)$(COMMA)bench)
	$(RUN) benchmarks/run.py --blackjax
	$(RUN) benchmarks/bench_subsampled.py
	$(RUN) benchmarks/bench_chunk_cache.py
	$(RUN) benchmarks/bench_record_grads.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
