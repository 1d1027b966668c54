# The two commands: `make demo` and `make test`. Both create .venv when it is missing.
# The venv uses Debian's Python with system site packages so ROS1's rospy (apt) imports.
PYTHON_BASE ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
EXTRAS ?= dev,all

.PHONY: demo test bench lint venv clean

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON_BASE) -m venv --system-site-packages $(VENV)
	$(PIP) install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
	# the CPU build of torch first, from this machine's disk; later ranges accept it
	$(PIP) install -q torch==2.13.0 2>&1 | grep -v "is ignored" || true
	$(PIP) install -q -e ".[$(EXTRAS)]" 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import cableload_sim, numba, casadi, torch"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/cableload simulate --planner formation,teacher --trajectory eight-slow --duration 60

test: venv
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: venv
	$(PY) -m pytest -q benchmarks --benchmark-enable --benchmark-only

lint: venv
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
